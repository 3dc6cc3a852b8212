"""Log records of a run carry its job id, kind and run number."""

from __future__ import annotations

import logging
from collections.abc import Iterator, MutableMapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from venturi_sa.storage.params import ClaimedJob

logger = logging.getLogger("venturi_sa.job")

if TYPE_CHECKING:
    _LoggerAdapter = logging.LoggerAdapter[logging.Logger]
else:  # LoggerAdapter is subscriptable at run time only from Python 3.11 on
    _LoggerAdapter = logging.LoggerAdapter


class JobLog(_LoggerAdapter):
    """Prefixes messages with ``[kind job_id run N]`` and sets ``job_id``, ``kind``, ``run_no`` extras."""

    def process(self, msg: Any, kwargs: MutableMapping[str, Any]) -> tuple[Any, MutableMapping[str, Any]]:
        extra = self.extra or {}
        kwargs["extra"] = {**extra, **kwargs.get("extra", {})}
        return f"[{extra['kind']} {extra['job_id']} run {extra['run_no']}] {msg}", kwargs


def job_log(job: ClaimedJob) -> JobLog:
    return JobLog(logger, {"job_id": job.id, "kind": job.kind, "run_no": job.run_count})


current_job: ContextVar[ClaimedJob | None] = ContextVar("venturi_current_job", default=None)


@contextmanager
def running(job: ClaimedJob) -> Iterator[None]:
    """Mark ``job`` as the run in progress on this thread (for :class:`RunContextFilter`)."""
    token = current_job.set(job)
    try:
        yield
    finally:
        current_job.reset(token)


class RunContextFilter(logging.Filter):
    """Adds ``job_id``, ``kind`` and ``run_no`` to every record emitted during a run.

    Records from the handler's own loggers get them too.  Outside a run the
    fields are ``"-"``.  Attach it to a handler::

        handler.addFilter(RunContextFilter())
    """

    def filter(self, record: logging.LogRecord) -> bool:
        job = current_job.get()
        if not hasattr(record, "job_id"):
            record.job_id = job.id if job else "-"
            record.kind = job.kind if job else "-"
            record.run_no = job.run_count if job else "-"
        return True
