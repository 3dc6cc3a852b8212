"""Persisting outcomes: each run's fenced row write, journal row and handler work commit together."""

from __future__ import annotations

import logging
from collections.abc import Callable

from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from venturi_sa.models import Models
from venturi_sa.states import Outcome
from venturi_sa.storage.outcomes import finish
from venturi_sa.storage.params import FinishParams
from venturi_sa.worker.executor import Run, failure

logger = logging.getLogger("venturi_sa.worker")


class Completer:
    """Owns every outcome write of a worker.

    A run whose handler used ``ctx.session`` is persisted in that session's
    transaction, so the handler's writes commit with the outcome or not at
    all.  A run whose fence no longer matches (its lease was lost) commits
    nothing and logs a warning.
    """

    def __init__(self, models: Models, open_session: Callable[[], Session]) -> None:
        self.models = models
        self.open_session = open_session
        self.lost: list[str] = []

    def persist(self, run: Run) -> bool:
        """Write ``run.params``; returns True if the outcome was recorded."""
        assert run.params is not None
        session = run.ctx.take_session()
        if session is None:
            return self._write(self.open_session(), run, run.params)
        if run.failed:
            session.rollback()  # the handler raised: discard its half-done writes
        try:
            return self._write(session, run, run.params, reraise=True)
        except SQLAlchemyError as exc:
            # The handler's own work failed to flush or commit: record a failure instead.
            run.ctx.log.warning("could not commit the job's session work: %s", exc)
            params = failure(run, f"could not commit the handler's session work: {type(exc).__name__}: {exc}")
            return self._write(self.open_session(), run, params)

    def release(self, run: Run, note: str) -> bool:
        """Return a run's job to ``pending`` without counting a failure."""
        params = FinishParams(fence=run.job.fence, outcome=Outcome.RELEASED, note=note)
        return self._write(self.open_session(), run, params)

    def _write(self, session: Session, run: Run, params: FinishParams, reraise: bool = False) -> bool:
        try:
            with session:
                if not finish(self.models, session, params):
                    session.rollback()
                    self.lost.append(run.job.id)
                    run.ctx.log.warning(
                        "lease lost: job %s run %d is no longer claimed by %s; its outcome (%s) "
                        "and session work were rolled back",
                        run.job.id, run.job.run_count, run.job.claimed_by, params.outcome.value,
                    )
                    return False
                session.commit()
                run.ctx.log.info("job %s", params.outcome.value if params.note is None
                                 else f"{params.outcome.value}: {params.note}")
                return True
        except SQLAlchemyError as exc:
            if reraise:
                raise
            run.ctx.log.error("could not record outcome %s: %s; the lease will expire and the job "
                              "will be recovered", params.outcome.value, exc)
            return False
