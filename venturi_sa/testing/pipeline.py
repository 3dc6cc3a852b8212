"""One run through the worker's own pipeline steps, keeping what the handler returned or raised.

:func:`venturi_sa.worker.executor.process` composed of the same public
steps (prepare -> execute -> classify, inside the same catch-all), so the
test helpers record exactly the :class:`~venturi_sa.storage.params.FinishParams`
a worker would, and can also hand the test the handler's raw result (to
re-raise an exception with its traceback, or to tell that an outcome was
corrected).  Keep it in step with ``process``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from sqlalchemy.orm import Session

from venturi_sa.storage.params import ClaimedJob
from venturi_sa.task import Registry
from venturi_sa.worker.context import JobContext
from venturi_sa.worker.executor import classify, exception_note, execute, failure, prepare
from venturi_sa.worker.joblog import job_log, running
from venturi_sa.worker.run import Run

logger = logging.getLogger("venturi_sa.testing")
NOT_RUN = object()
"""The result of a run that ended before its handler was called (e.g. a payload that cannot be decoded)."""


def new_run(job: ClaimedJob, open_session: Callable[[], Session]) -> Run:
    """A run of ``job`` whose ``ctx.session`` is whatever ``open_session`` returns."""
    return Run(job=job, ctx=JobContext(job, job.carry, open_session, job_log(job)))


def run_pipeline(run: Run, registry: Registry) -> Any:
    """Set ``run.params`` as the worker would; return the handler's return value or exception."""
    started = time.monotonic()
    result: Any = NOT_RUN
    try:
        with running(run.job):
            params = prepare(run, registry)
            if params is None:
                result = execute(run)
                params = classify(run, result)
            run.params = params
    except Exception as exc:  # noqa: BLE001 - the same catch-all as process()
        logger.exception("job %s: unexpected error in the run pipeline", run.job.id)
        run.failed = True
        run.params = failure(run, f"venturi could not finish the run: {exception_note(exc)}")
        result = exc
    finally:
        run.duration = time.monotonic() - started
    return result


__all__ = ["NOT_RUN", "new_run", "run_pipeline"]
