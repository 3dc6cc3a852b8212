"""One run through the worker's own pipeline, keeping what the handler returned or raised.

:func:`venturi_sa.worker.pipeline.decide` itself, so the test helpers record
exactly the :class:`~venturi_sa.storage.params.FinishParams` a worker would,
and can also hand the test the handler's raw result (to re-raise an
exception with its traceback, or to tell that an outcome was corrected).
"""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy.orm import Session

from venturi_sa.storage.backend import Backend
from venturi_sa.storage.params import ClaimedJob, Runner
from venturi_sa.task import Registry
from venturi_sa.worker.checkpoint import Checkpointer
from venturi_sa.worker.context import JobContext
from venturi_sa.worker.joblog import job_log
from venturi_sa.worker.pipeline import NOT_RUN
from venturi_sa.worker.pipeline import decide as run_pipeline
from venturi_sa.worker.run import Run


def new_run(job: ClaimedJob, open_session: Callable[[], Session], registry: Registry,
            backend: Backend | None = None) -> Run:
    """A run of ``job`` whose ``ctx.session`` is whatever ``open_session`` returns.

    With ``backend``, ``ctx.checkpoint()`` writes (fenced) in that same
    session, i.e. in the test's transaction; without, it only checks and
    keeps the carry.
    """
    run = Run(job=job, ctx=JobContext(job, job.carry, open_session, job_log(job)))
    schema = registry.get(job.kind).carry_schema if job.kind in registry else None
    def begin(fn: Callable[[Runner], bool]) -> bool:
        return fn(open_session())

    run.ctx.checkpointer = Checkpointer(job.fence, schema, backend, begin if backend is not None else None)
    return run


__all__ = ["NOT_RUN", "new_run", "run_pipeline"]
