"""``Task.on_dead`` for every transition to ``dead``, whoever makes it, its session writes committed once.

A worker's own run that ends ``dead`` calls the hook in the transaction
recording it (``venturi_sa/worker/outcome_hooks.py``).  Every other way to
``dead`` (a lease recovery at the backstop; a cancel still undelivered when
its run was retried, released or recovered; ``kill``/``cancel`` by an
operator from Python, the CLI or the dashboard) writes an owed call in the
transaction that made the job ``dead``.  :func:`make_owed_calls` makes them:

* an operator action whose queue has the task's code calls it at once, in
  the action's transaction (a savepoint: a hook that raises is rolled back
  alone, logged at ERROR, and left owed);
* otherwise the next worker running that kind makes it, within its
  recovery interval, deleting the owed row in the hook's transaction, so
  the hook's writes and the row's removal commit together, once.

A hook that raises is retried with a backoff (``attempts``, ``last_error``
and ``not_before`` on the row).  A row of a kind whose task does not
override ``on_dead`` owes nothing: an action with the task deletes it, and
so does every worker running the kind (:mod:`venturi_sa.worker.owed_calls`).

The hook's ``ctx`` is an
:class:`~venturi_sa.declarations.task_contexts.OutcomeFacts` built here from
the owed row, the same record the worker builds for its own run's hook, so
this module needs nothing of the worker.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from sqlalchemy.orm import Session

from venturi_sa.declarations.task_contexts import OutcomeFacts
from venturi_sa.states import Outcome
from venturi_sa.storage import owed_calls as owed_rows
from venturi_sa.task import Registry, Task

if TYPE_CHECKING:
    from venturi_sa.models import Models

logger = logging.getLogger("venturi_sa.worker")
MAX_RETRY_WAIT = timedelta(hours=1)


def overrides_on_dead(task_type: type[Task]) -> bool:
    return task_type.on_dead is not Task.on_dead


def retry_wait(attempts: int) -> timedelta:
    """How long a failed owed call waits before its next attempt: 1 s, doubling, at most an hour."""
    return min(timedelta(seconds=2 ** min(attempts, 20)), MAX_RETRY_WAIT)


def make_owed_calls(session: Session, models: Models, registry: Registry, *, kinds: list[str] | None = None,
                    job_ids: list[str] | None = None, limit: int = 50) -> int:
    """Make the due owed ``on_dead`` calls of ``kinds`` (default: the registry's) or of ``job_ids``, in ``session``.

    Each call runs in a savepoint of the session's transaction, and its owed
    row is deleted there (or deferred, if the hook raised); the caller
    commits (everything made commits then, or nothing does).  A kind not in
    ``registry`` is left for a process that has its code.  Returns how many
    owed rows were handled (made, settled without a hook, or deferred).
    """
    wanted = [k for k in (kinds if kinds is not None else registry.kinds) if k in registry]
    if not wanted and not job_ids:
        return 0
    handled = 0
    for row in owed_rows.take(models, session, kinds=wanted, job_ids=job_ids or (), limit=limit):
        if row.kind in registry:
            _make(session, models, registry.get(row.kind), row)
            handled += 1
    return handled


def _make(session: Session, models: Models, task_type: type[Task], row: Any) -> None:
    """One owed call in a Core savepoint (application session events fire only at the real commit)."""
    if not overrides_on_dead(task_type):
        owed_rows.settle(models, session, row.id)
        return
    session.flush()  # the caller's own pending work stays outside the hook's savepoint
    savepoint = session.connection().begin_nested()
    log = logging.LoggerAdapter(logger, {"job_id": row.job_id, "kind": row.kind, "run_no": row.run_no})
    try:
        task = task_type.from_stored(row.payload)
        ctx = OutcomeFacts(job_id=row.job_id, kind=row.kind, run_count=row.run_no,
                           failure_count=row.failure_count, outcome=Outcome.DEAD, note=row.note, result=None,
                           carry=row.carry, session=session, log=log)
        task.on_dead(ctx, row.note)
        session.flush()
        owed_rows.settle(models, session, row.id)
    except BaseException as exc:  # noqa: BLE001 - user code (SystemExit too); the call stays owed
        if isinstance(exc, KeyboardInterrupt):
            raise  # Ctrl-C stops the process: the savepoint rolls back with its transaction, the call stays owed
        savepoint.rollback()
        _forget_unflushed(session)
        error = f"{type(exc).__name__}: {exc}"[:2000]
        wait = retry_wait(row.attempts)
        logger.error("%s.on_dead for job %s raised %s; retrying in %s", task_type.__name__, row.job_id, error,
                     wait, exc_info=True)
        owed_rows.defer(models, session, row.id, error, wait)
        return
    savepoint.commit()


def _forget_unflushed(session: Session) -> None:
    """Drop what a failed hook left in the session: its new objects, and its changes to loaded ones.

    (A hook whose own flush failed has made the session unusable: the action
    then fails as a whole and writes nothing.)
    """
    for obj in list(session.new) + list(session.deleted):
        session.expunge(obj)  # never inserted, nor deleted, at the action's commit
    for obj in list(session.dirty):
        session.expire(obj)  # reloaded as the database has it
