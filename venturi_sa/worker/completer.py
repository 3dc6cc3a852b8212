"""Persisting outcomes: each run's fenced row write, journal row and handler work commit together."""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable

import sqlalchemy as sa
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from venturi_sa.models import Models
from venturi_sa.states import Outcome
from venturi_sa.storage.outcomes import finish, finish_many
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


class Batcher(threading.Thread):
    """Writes the outcomes of runs that did not use ``ctx.session`` in batches.

    Outcomes are collected for at most ``flush_interval`` seconds or
    ``max_batch`` runs, then written by one statement (a fenced UPDATE feeding
    the journal INSERT) in one transaction.  ``done(run, recorded)`` is called for every
    run after its batch committed (or failed).
    """

    def __init__(self, models: Models, engine: sa.Engine,
                 done: Callable[[Run, bool], None], flush_interval: float = 0.005,
                 max_batch: int = 200) -> None:
        super().__init__(name=f"venturi-completer-{models.prefix}", daemon=True)
        self.models = models
        self.engine = engine
        self.done = done
        self.flush_interval = flush_interval
        self.max_batch = max_batch
        self._queue: queue.SimpleQueue[Run | None] = queue.SimpleQueue()

    def submit(self, run: Run) -> None:
        self._queue.put(run)

    def close(self) -> None:
        """Flush what is queued and stop the thread."""
        self._queue.put(None)

    def _collect(self) -> tuple[list[Run], bool]:
        first = self._queue.get()
        if first is None:
            return [], True
        batch = [first]
        deadline = time.monotonic() + self.flush_interval
        while len(batch) < self.max_batch:
            try:
                item = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                break
            if item is None:
                return batch, True
            batch.append(item)
        return batch, False

    def run(self) -> None:
        closing = False
        while not closing:
            batch, closing = self._collect()
            if not batch:
                continue
            try:
                self._write(batch)
            except Exception:  # noqa: BLE001 - the thread must survive to serve later batches
                logger.exception("outcome batch of %d failed; the leases will expire and the jobs "
                                 "will be recovered", len(batch))
                for run in batch:
                    self.done(run, False)

    def _write(self, batch: list[Run]) -> None:
        recorded: set[str] = set()
        try:
            with self.engine.begin() as conn:
                recorded = finish_many(self.models, conn, [run.params for run in batch if run.params])
        except SQLAlchemyError as exc:
            logger.error("could not record %d outcomes: %s; their leases will expire and the jobs "
                         "will be recovered", len(batch), exc)
        for run in batch:
            ok = run.job.id in recorded
            assert run.params is not None
            if ok:
                run.ctx.log.info("job %s", run.params.outcome.value if run.params.note is None
                                 else f"{run.params.outcome.value}: {run.params.note}")
            else:
                run.ctx.log.warning("lease lost or write failed: outcome %s of run %d was not recorded",
                                    run.params.outcome.value, run.job.run_count)
            self.done(run, ok)
