"""Recording outcomes: writes retried on any database error while the lease lasts, and their log lines."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TypeVar

from sqlalchemy.exc import SQLAlchemyError

from venturi_sa.states import Outcome
from venturi_sa.storage.params import FinishParams
from venturi_sa.worker.joblog import logger as job_logger
from venturi_sa.worker.pipeline_stages import exception_note
from venturi_sa.worker.run import Run

logger = logging.getLogger("venturi_sa.worker")
T = TypeVar("T")
FIRST_DELAY, MAX_DELAY = 0.05, 2.0


def always(exc: SQLAlchemyError) -> bool:
    """Every database error may pass: an outcome write is retried whatever failed it."""
    return True


def retrying(write: Callable[[], T], *, until: float, what: str, abort: threading.Event | None = None,
             gave_up: Callable[[], bool] = lambda: False,
             retryable: Callable[[SQLAlchemyError], bool] = always) -> T:
    """``write()``, retried on ``retryable`` errors with a capped backoff until monotonic time ``until``.

    Raises the last error once it is not retryable, the time is up,
    ``abort`` is set or ``gave_up()`` says the write is pointless.
    """
    delay = FIRST_DELAY
    while True:
        try:
            return write()
        except SQLAlchemyError as exc:
            if not retryable(exc) or time.monotonic() + delay > until or gave_up() or (
                    abort is not None and abort.is_set()):
                raise
            logger.warning("%s failed (%s); retrying in %.2fs", what, exception_note(exc).splitlines()[0], delay)
            if abort is not None:
                abort.wait(delay)
            else:
                time.sleep(delay)
            delay = min(delay * 2, MAX_DELAY)


def log_recorded(run: Run, params: FinishParams, recorded: Outcome) -> None:
    """The journal's log line, once per recorded run: the outcome ``recorded``, which may not be ``params``'."""
    if not job_logger.isEnabledFor(logging.INFO):  # the usual case: no message, no per-job logger made
        return
    if recorded is not params.outcome:
        run.ctx.log.info("job %s: a cancel request it never read turned its %s into %s", recorded.value,
                         params.outcome.value, recorded.value)
        return
    run.ctx.log.info("job %s", params.outcome.value if params.note is None
                     else f"{params.outcome.value}: {params.note.splitlines()[0] if params.note else ''}")


def log_lost(run: Run, params: FinishParams) -> None:
    """Warn that the fenced write found the claim gone; info only if the lease renewal warned already."""
    level = logging.INFO if run.ctx.lease_lost else logging.WARNING
    run.ctx.log.log(level, "lease lost: job %s run %d is no longer claimed by %s; its outcome (%s) and "
                    "session work were rolled back", run.job.id, run.job.run_count,
                    run.job.claimed_by, params.outcome.value)
