"""Persisting outcomes: each run's fenced row write, journal row and handler work commit together.

Every write is retried on transient database errors (a dropped connection,
a lock or deadlock, a restart) with a capped backoff for as long as the
run's lease lasts; a run whose lease is known lost is not retried, since its
fence can no longer hold.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import TypeVar

from sqlalchemy.exc import DBAPIError, SQLAlchemyError
from sqlalchemy.orm import Session

from venturi_sa.states import Outcome
from venturi_sa.storage.backend import Backend
from venturi_sa.storage.faults import is_transient
from venturi_sa.storage.params import FinishManyParams, FinishParams
from venturi_sa.worker.engines import Connections
from venturi_sa.worker.executor import close_quietly, exception_note, failure
from venturi_sa.worker.outcome_hooks import has_hook, hook_call, hook_name
from venturi_sa.worker.run import Run
from venturi_sa.worker.sessions import RunSession

logger = logging.getLogger("venturi_sa.worker")
T = TypeVar("T")
FIRST_DELAY, MAX_DELAY = 0.05, 2.0


def retrying(write: Callable[[], T], *, until: float, what: str, abort: threading.Event | None = None,
             gave_up: Callable[[], bool] = lambda: False,
             retryable: Callable[[SQLAlchemyError], bool] = is_transient) -> T:
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


def log_recorded(run: Run, params: FinishParams) -> None:
    run.ctx.log.info("job %s", params.outcome.value if params.note is None
                     else f"{params.outcome.value}: {params.note.splitlines()[0] if params.note else ''}")


def log_lost(run: Run, params: FinishParams) -> None:
    """Warn that the fenced write found the claim gone; info only if the lease renewal warned already."""
    level = logging.INFO if run.ctx.lease_lost else logging.WARNING
    run.ctx.log.log(level, "lease lost: job %s run %d is no longer claimed by %s; its outcome (%s) and "
                    "session work were rolled back", run.job.id, run.job.run_count,
                    run.job.claimed_by, params.outcome.value)


def _savepoint_can_retry(exc: SQLAlchemyError) -> bool:
    """A statement inside the handler's transaction can be retried only while its connection lives."""
    return is_transient(exc) and not (isinstance(exc, DBAPIError) and exc.connection_invalidated)


class Completer:
    """Owns the outcome writes a worker makes outside the batcher.

    A run whose handler used ``ctx.session`` (or ``ctx.session_async``) is
    persisted in that session's transaction, so the handler's writes commit
    with the outcome or not at all; an ``AsyncSession`` is driven on the
    worker's loop, through the async driver, while the calling thread waits
    (and does any retry backoff, so the loop never sleeps).  A run whose
    fence no longer matches (its lease was lost) commits nothing and logs a
    warning.
    """

    def __init__(self, backend: Backend, conns: Connections, retry_for: Callable[[Sequence[Run]], float],
                 abort: threading.Event) -> None:
        self.backend = backend
        self.conns = conns
        self.retry_for = retry_for
        self.abort = abort

    # -- one run in its own transaction ------------------------------------------------
    def write(self, run: Run, params: FinishParams) -> bool:
        """Write ``params`` in a statement of its own (autocommit), retried; True if recorded."""
        def once() -> bool:
            return params.fence in self.conns.autocommit(
                lambda conn: self.backend.finish_many(conn, FinishManyParams(outcomes=[params])))

        try:
            ok = retrying(once, until=self.retry_for([run]), what=f"recording job {run.job.id}",
                          abort=self.abort, gave_up=lambda: run.ctx.lease_lost)
        except SQLAlchemyError as exc:
            run.ctx.log.error("could not record outcome %s: %s; the lease will expire and the job will be "
                              "recovered", params.outcome.value, exception_note(exc))
            return False
        (log_recorded if ok else log_lost)(run, params)
        return ok

    def release(self, run: Run, note: str) -> bool:
        """Return a run's job to ``pending`` without counting a failure."""
        return self.write(run, FinishParams(fence=run.fence, outcome=Outcome.RELEASED, note=note))

    # -- a run whose handler used ctx.session ---------------------------------------------
    def persist_in_session(self, run: Run, may_rerun: bool = False) -> bool | None:
        """Write ``run.params`` in the handler's session and commit both; True if recorded.

        If the handler raised, its session work is rolled back first.  A
        transient error at the outcome statement is retried inside a
        savepoint, keeping the handler's work.  If the handler's work cannot
        be flushed or committed, it is rolled back; then, when the error was
        transient (the connection died) and ``may_rerun``, None is returned:
        the caller runs the handler again under the same claim, so a
        succeeded job is not counted as failed.  Otherwise a retryable
        failure is recorded instead.
        """
        assert run.params is not None
        if has_hook(run) and not run.ctx.session_used:
            run.ctx.session  # noqa: B018 - the outcome hook's session: opened here, the outcome written in it
        session = run.ctx.take_session()
        if session is None:
            return self.write(run, run.params)
        try:
            return self._in_session(session, run, run.params, may_rerun)
        finally:
            close_quietly(session)

    def _in_session(self, session: RunSession, run: Run, params: FinishParams, may_rerun: bool) -> bool | None:
        try:
            session.call(lambda s: _flushed(s, rollback_first=run.failed))
        except SQLAlchemyError as exc:
            return self._session_failed(session, run, params, exc, "flush", may_rerun)
        try:
            ok = retrying(lambda: session.call(lambda s: self._fenced_in_savepoint(s, params)),
                          until=self.retry_for([run]), what=f"recording job {run.job.id}", abort=self.abort,
                          gave_up=lambda: run.ctx.lease_lost, retryable=_savepoint_can_retry)
            if not ok:
                session.call(Session.rollback)
                log_lost(run, params)
                return False
            hook = hook_call(run, params)
            if hook is not None and not self._hooked(session, run, hook):
                return self._hook_failed(session, run)
            session.call(Session.commit)
        except SQLAlchemyError as exc:
            return self._session_failed(session, run, params, exc, "commit", may_rerun)
        log_recorded(run, params)
        return True

    def _hooked(self, session: RunSession, run: Run, hook: Callable[[Session], None]) -> bool:
        """Run the task's outcome hook in the outcome's transaction; False (logged) if it raised."""
        try:
            session.call(hook)
            return True
        except SQLAlchemyError:
            raise  # a database fault: the commit path's handling (retry, rerun, record a failure)
        except Exception as exc:  # noqa: BLE001 - user code
            run.ctx.log.warning("%s.%s raised %s", type(run.task).__name__, hook_name(run),
                                exception_note(exc), exc_info=True)
            run.hook_error = f"{type(run.task).__name__}.{hook_name(run)} raised {exception_note(exc)}"
            return False

    def _hook_failed(self, session: RunSession, run: Run) -> bool:
        """Roll the outcome and the handler's work back; record a retryable failure (no hook again)."""
        close_quietly(session)
        return self.write(run, failure(run, f"{run.hook_error}; the outcome and its session work "
                                            "were rolled back"))

    def _fenced_in_savepoint(self, session: Session, params: FinishParams) -> bool:
        """The fenced outcome statement inside a Core savepoint of the session's connection.

        A Core savepoint, not ``session.begin_nested()``: the application's
        own session event hooks (``before_commit``/``after_commit``) must
        fire once, at the real commit, not at a savepoint release.
        """
        conn = session.connection()
        savepoint = conn.begin_nested()
        try:
            ok = params.fence in self.backend.finish_many(conn, FinishManyParams(outcomes=[params]))
        except BaseException:
            savepoint.rollback()
            raise
        savepoint.commit()
        return ok

    def _session_failed(self, session: RunSession, run: Run, params: FinishParams, exc: SQLAlchemyError,
                        step: str, may_rerun: bool) -> bool | None:
        """The handler's session could not be committed: roll it back, then rerun or record a failure.

        If the commit did reach the database before the error, the job is no
        longer claimed, so a fenced write (or the rerun's) finds nothing to change.
        """
        close_quietly(session)
        if may_rerun and is_transient(exc) and not run.failed and not run.ctx.lease_lost:
            run.ctx.log.warning("could not %s the job's session work (%s); it was rolled back and the "
                                "handler runs again under the same claim", step,
                                exception_note(exc).splitlines()[0])
            return None
        if params.outcome in (Outcome.RETRIED, Outcome.DEAD) and run.failed:
            retry_params = params  # the handler raised: record that failure as it was classified
        else:
            run.ctx.log.warning("could not %s the job's session work: %s", step, exception_note(exc))
            retry_params = failure(run, f"could not {step} the handler's session work (rolled back): "
                                        f"{exception_note(exc)}")
        return self.write(run, retry_params)


def _flushed(session: Session, rollback_first: bool) -> None:
    """Flush the handler's pending work; if the handler raised, discard it first."""
    if rollback_first:
        session.rollback()  # the handler raised: discard its half-done writes
    session.flush()
