"""Persisting outcomes: each run's fenced row write, journal row and handler work commit together.

Every write is retried on any database error (a dropped connection, a lock
or deadlock, a restart, but also a privilege revoked for a moment or a
read-only transaction right after a failover) with a capped backoff for one
lease length from the first attempt (the lease keeper goes on renewing the
run's lease meanwhile): the handler succeeded or failed already, and that
must not change because a write failed.  A fenced-out write is final (the
lease was lost: the claim is someone else's), and so is the error once that
window has passed or the worker is stopping at once (``stop(now=True)``); the
job is then recovered when its lease expires.
"""

from __future__ import annotations

import enum
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from sqlalchemy.exc import DBAPIError, SQLAlchemyError
from sqlalchemy.orm import Session

from venturi_sa.states import Outcome
from venturi_sa.storage.backend import Backend, Transactions
from venturi_sa.storage.faults import is_transient
from venturi_sa.storage.params import FinishManyParams, FinishParams
from venturi_sa.worker.batcher import Batcher
from venturi_sa.worker.outcome_hooks import has_hook, hook_call, hook_name
from venturi_sa.worker.pipeline_stages import absorb, close_quietly, exception_note, needs_wake, wake
from venturi_sa.worker.producer import DEFAULT_LEASE
from venturi_sa.worker.recording import log_lost, log_recorded, retrying
from venturi_sa.worker.run import Run
from venturi_sa.worker.run_sessions import RunSession

logger = logging.getLogger("venturi_sa.worker")


def _savepoint_can_retry(exc: SQLAlchemyError) -> bool:
    """A statement inside the handler's transaction can be retried only while its connection lives."""
    return not (isinstance(exc, DBAPIError) and exc.connection_invalidated)


class Persist(enum.Enum):
    """What :meth:`Completer.persist` did with a run's outcome."""

    RECORDED = "recorded"  # written and committed (reported)
    LOST = "lost"  # fenced out: the lease was lost, nothing committed (reported)
    HANDED_ON = "handed on"  # queued for the batch writer, which reports it
    RERUN = "rerun"  # the handler's session work was lost to a transient fault: run the handler again


@dataclass(frozen=True)
class Refused:
    """The outcome could not be recorded as decided; ``note`` says why (nothing was committed).

    ``keep_failure``: a handler that raised keeps its classified failure.
    """

    note: str
    keep_failure: bool = False


class Completer:
    """Owns every outcome write of a worker: the batch writer, and the handler's own session.

    A run whose handler used ``ctx.session`` (or ``ctx.session_async``),
    whose task has an outcome hook for its outcome, or that suspended in a
    wait (the wake stage, :func:`~venturi_sa.worker.pipeline_stages.wake`), is
    persisted in that session's transaction, so the handler's writes, the
    wake and the hook commit with the outcome or not at all; an ``AsyncSession`` is driven on the worker's
    loop, through the async driver, while the calling thread waits (and does
    any retry backoff, so the loop never sleeps).  Any other run goes to the
    :class:`~venturi_sa.worker.batcher.Batcher`.  A run whose fence no longer
    matches (its lease was lost) commits nothing and logs a warning.  Every
    recorded run gets ``run.recorded``, the outcome the write itself
    reported (``dead`` where a stored cancel turned the run's own), and its
    wake, hook, log line and report follow that, exactly once.
    ``done([(run, recorded), ...])`` hears about every run once its outcome
    is persisted or given up on.  The batch writer runs its transactions in
    ``batch_conns`` (one thread: it may keep a connection), the rest in
    ``conns`` (shared by the executor threads).
    """

    def __init__(self, backend: Backend, conns: Transactions, leases: Mapping[str, timedelta],
                 abort: threading.Event, done: Callable[[list[tuple[Run, bool]]], None], *,
                 batch: bool = True, max_backlog: int = 100, batch_conns: Transactions | None = None) -> None:
        self.backend = backend
        self.conns = conns
        self.batch_conns = conns if batch_conns is None else batch_conns  # the batch writer's alone
        self.leases = dict(leases)
        self.abort = abort
        self.done = done
        self.batch = batch
        self.max_backlog = max_backlog
        self.batcher: Batcher | None = None

    def retry_for(self, runs: Sequence[Run]) -> float:
        """Outcome writes are retried until this monotonic time: as long as the shortest lease among ``runs``."""
        lease = min((self.leases.get(r.job.kind, DEFAULT_LEASE) for r in runs), default=DEFAULT_LEASE)
        return time.monotonic() + lease.total_seconds()

    # -- lifecycle ----------------------------------------------------------------------
    def start(self) -> None:
        """Start the batch writer (if outcomes are batched)."""
        if self.batch:
            self.batcher = Batcher(self.backend, self.batch_conns, self.done, self.retry_for, self.abort,
                                   max_backlog=self.max_backlog)
            self.batcher.start()

    def close(self, timeout: float) -> None:
        """Flush every outcome handed to the batch writer, then stop it; waits up to ``timeout``."""
        if self.batcher is not None:
            self.batcher.close(timeout)

    def report(self, run: Run, recorded: bool) -> None:
        """Tell ``done`` that ``run``'s outcome was persisted (``recorded``) or given up on."""
        self.done([(run, recorded)])

    # -- persisting a run's decided outcome ------------------------------------------------
    def persist(self, run: Run, may_rerun: bool = False) -> Persist | Refused:
        """Persist ``run.params`` in the batch or in the handler's session (see the class).

        In the handler's session: if the handler raised, its work is rolled
        back first; a failing outcome statement is retried inside a
        savepoint, keeping the handler's work.  If the handler's work cannot
        be flushed or committed it is rolled back; then, when the error was
        transient (the connection died) and ``may_rerun``, ``RERUN`` asks the
        caller to run the handler again under the same claim, so a succeeded
        job is not counted as failed.  Otherwise :class:`Refused` says why.
        """
        assert run.params is not None
        hooked, waking = has_hook(run), needs_wake(run)
        if self.batcher is not None and not hooked and not waking and not run.ctx.session_used:
            self.batcher.submit(run)  # blocks while the backlog is full: the run keeps its slot
            return Persist.HANDED_ON
        if hooked and not run.ctx.session_used:
            run.ctx.session  # noqa: B018 - the outcome hook's session: opened here, the outcome written in it
        session = run.ctx.take_session()
        if session is None:
            ok = self.write(run, run.params, woken=waking)
        else:
            try:
                outcome = self._in_session(session, run, run.params, may_rerun)
            finally:
                close_quietly(session)
            if not isinstance(outcome, bool):
                return outcome
            ok = outcome
        self.report(run, ok)
        return Persist.RECORDED if ok else Persist.LOST

    def write(self, run: Run, params: FinishParams, woken: bool = False) -> bool:
        """Write ``params`` in a transaction of its own, retried; True if recorded (committed).

        Sets ``run.recorded`` to the outcome the write reported.  No hook
        runs here; with ``woken`` the wake stage runs in the same transaction,
        after the fenced write, on any store.  A crash before the commit
        records nothing: the job is recovered when its lease expires.
        """
        def in_transaction(conn: Any) -> Outcome | None:
            recorded = self.backend.finish_many(conn, FinishManyParams(outcomes=[params])).get(params.fence)
            call = wake(run, params, recorded) if woken and recorded is not None else None
            if call is not None:
                call(conn)  # commits or rolls back with the outcome
            return recorded

        def once() -> Outcome | None:
            return self.conns.begin(in_transaction)

        try:
            recorded = retrying(once, until=self.retry_for([run]), what=f"recording job {run.job.id}",
                                abort=self.abort, gave_up=lambda: run.ctx.lease_lost)
        except SQLAlchemyError as exc:
            run.ctx.log.error("could not record outcome %s: %s; the lease will expire and the job will be "
                              "recovered", params.outcome.value, exception_note(exc))
            return False
        run.recorded = recorded
        if recorded is None:
            log_lost(run, params)
            return False
        log_recorded(run, params, recorded)
        return True

    def release(self, run: Run, note: str) -> bool:
        """Return a run's job to ``pending`` without counting a failure."""
        return self.write(run, FinishParams(fence=run.fence, outcome=Outcome.RELEASED, note=note))

    # -- a run whose handler used ctx.session ---------------------------------------------
    def _in_session(self, session: RunSession, run: Run, params: FinishParams,
                    may_rerun: bool) -> bool | Persist | Refused:
        try:
            session.call(lambda s: _flushed(s, rollback_first=run.failed))
        except SQLAlchemyError as exc:
            return self._session_failed(session, run, exc, "flush", may_rerun)
        try:
            recorded = retrying(lambda: session.call(lambda s: self._fenced_in_savepoint(s, params)),
                                until=self.retry_for([run]), what=f"recording job {run.job.id}",
                                abort=self.abort, gave_up=lambda: run.ctx.lease_lost,
                                retryable=_savepoint_can_retry)
            if recorded is None:
                session.call(Session.rollback)
                log_lost(run, params)
                return False
            woken = wake(run, params, recorded)
            if woken is not None:
                session.call(woken)  # the wake stage: after the fenced write, in its transaction
            hook = hook_call(run, params, recorded)
            if hook is not None and not self._hooked(session, run, hook):
                close_quietly(session)  # the outcome and the handler's work roll back; no hook runs again
                return Refused(f"{run.hook_error}; the outcome and its session work were rolled back")
            session.call(Session.commit)
        except SQLAlchemyError as exc:
            return self._session_failed(session, run, exc, "commit", may_rerun)
        run.recorded = recorded
        log_recorded(run, params, recorded)
        return True

    def _hooked(self, session: RunSession, run: Run, hook: Callable[[Session], None]) -> bool:
        """Run the task's outcome hook in the outcome's transaction; False (logged) if it raised."""
        try:
            session.call(hook)
            return True
        except SQLAlchemyError:
            raise  # a database fault: the commit path's handling (retry, rerun, record a failure)
        except BaseException as exc:  # noqa: BLE001 - user code
            absorb(exc)
            run.ctx.log.warning("%s.%s raised %s", type(run.task).__name__, hook_name(run),
                                exception_note(exc), exc_info=True)
            run.hook_error = f"{type(run.task).__name__}.{hook_name(run)} raised {exception_note(exc)}"
            return False

    def _fenced_in_savepoint(self, session: Session, params: FinishParams) -> Outcome | None:
        """The fenced outcome statement inside a Core savepoint of the session's connection.

        Returns the outcome the statement reported recording (which decides
        the wake and the hook), or None if the fence failed; no read after
        it.  A Core savepoint, not ``session.begin_nested()``:
        the application's own session event hooks (``before_commit``/
        ``after_commit``) must fire once, at the real commit, not at a
        savepoint release.
        """
        conn = session.connection()
        savepoint = conn.begin_nested()
        try:
            recorded = self.backend.finish_many(conn, FinishManyParams(outcomes=[params])).get(params.fence)
        except BaseException:
            savepoint.rollback()
            raise
        savepoint.commit()
        return recorded

    def _session_failed(self, session: RunSession, run: Run, exc: SQLAlchemyError, step: str,
                        may_rerun: bool) -> Persist | Refused:
        """The handler's session could not be committed: roll it back, then rerun or refuse the outcome.

        If the commit did reach the database before the error, the job is no
        longer claimed, so a fenced write (or the rerun's) finds nothing to change.
        """
        close_quietly(session)
        if may_rerun and is_transient(exc) and not run.failed and not run.ctx.lease_lost:
            run.ctx.log.warning("could not %s the job's session work (%s); it was rolled back and the "
                                "handler runs again under the same claim", step,
                                exception_note(exc).splitlines()[0])
            return Persist.RERUN
        if not run.failed:
            run.ctx.log.warning("could not %s the job's session work: %s", step, exception_note(exc))
        return Refused(f"could not {step} the handler's session work (rolled back): {exception_note(exc)}",
                       keep_failure=run.failed)


def _flushed(session: Session, rollback_first: bool) -> None:
    """Flush the handler's pending work; if the handler raised, discard it first."""
    if rollback_first:
        session.rollback()  # the handler raised: discard its half-done writes
    session.flush()
