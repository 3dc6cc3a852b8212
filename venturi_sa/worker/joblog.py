"""Log records of a run carry its job id, kind and run number."""

from __future__ import annotations

import logging
from collections.abc import MutableMapping
from typing import Any

from venturi_sa.storage.params import ClaimedJob

logger = logging.getLogger("venturi_sa.job")


class JobLog(logging.LoggerAdapter[logging.Logger]):
    """Prefixes messages with ``[kind job_id run N]`` and sets ``job_id``, ``kind``, ``run_no`` extras."""

    def process(self, msg: Any, kwargs: MutableMapping[str, Any]) -> tuple[Any, MutableMapping[str, Any]]:
        extra = self.extra or {}
        kwargs["extra"] = {**extra, **kwargs.get("extra", {})}
        return f"[{extra['kind']} {extra['job_id']} run {extra['run_no']}] {msg}", kwargs


def job_log(job: ClaimedJob) -> JobLog:
    return JobLog(logger, {"job_id": job.id, "kind": job.kind, "run_no": job.run_count})
