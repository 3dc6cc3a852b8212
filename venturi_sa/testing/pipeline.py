"""One run through the worker's own pipeline, keeping what the handler returned or raised.

:func:`venturi_sa.worker.executor.process` itself, so the test helpers record
exactly the :class:`~venturi_sa.storage.params.FinishParams` a worker would,
and can also hand the test the handler's raw result (to re-raise an
exception with its traceback, or to tell that an outcome was corrected).
"""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy.orm import Session

from venturi_sa.storage.params import ClaimedJob
from venturi_sa.worker.context import JobContext
from venturi_sa.worker.executor import NOT_RUN
from venturi_sa.worker.executor import process as run_pipeline
from venturi_sa.worker.joblog import job_log
from venturi_sa.worker.run import Run


def new_run(job: ClaimedJob, open_session: Callable[[], Session]) -> Run:
    """A run of ``job`` whose ``ctx.session`` is whatever ``open_session`` returns."""
    return Run(job=job, ctx=JobContext(job, job.carry, open_session, job_log(job)))


__all__ = ["NOT_RUN", "new_run", "run_pipeline"]
