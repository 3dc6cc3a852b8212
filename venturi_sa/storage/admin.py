"""Operator actions on one job: requeue, kill, release.  Each is one guarded transition.

:func:`apply` locks the row (``SELECT … FOR UPDATE``) in the caller's
transaction, checks its status, then updates it with the expected status
repeated in the ``WHERE`` clause and appends one journal row carrying the
operator's note (``run_no`` = the job's current ``run_count``): that write is
:func:`guarded_write`, which the runtime-control actions (cancel, edit) share.  Nothing here
commits: on rollback neither the change nor its journal row exists, and the
row lock is held until the caller's transaction ends.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from venturi_sa.models import Models
from venturi_sa.states import TRANSITIONS, Outcome, Status
from venturi_sa.storage import dependents, drivers
from venturi_sa.storage.history import job_columns
from venturi_sa.storage.params import Runner


def _select(*columns: Any) -> sa.Select[Any]:
    """``select()`` typed loosely, the same under SQLAlchemy 2.0 and 2.1."""
    return sa.select(*columns)


@dataclass(frozen=True, kw_only=True)
class AdminAction:
    """One admin transition: the status it needs, the status it leaves, its journal outcome."""

    name: str
    verb: str  # for the journal note: "<verb> by operator"
    from_status: Status
    to_status: Status
    outcome: Outcome

    def __post_init__(self) -> None:
        if (self.from_status, self.to_status) not in TRANSITIONS:
            raise ValueError(f"{self.name}: {self.from_status.value} -> {self.to_status.value} "
                             "is not an allowed transition")


# The journal CHECK allows only the seven run outcomes, so an operator
# requeue is journaled as 'released' (back to pending, no failure counted).
REQUEUE = AdminAction(name="requeue", verb="requeued", from_status=Status.DEAD,
                      to_status=Status.PENDING, outcome=Outcome.RELEASED)
KILL = AdminAction(name="kill", verb="killed", from_status=Status.PENDING,
                   to_status=Status.DEAD, outcome=Outcome.DEAD)
RELEASE = AdminAction(name="release", verb="released", from_status=Status.CLAIMED,
                      to_status=Status.PENDING, outcome=Outcome.RELEASED)


@dataclass(frozen=True, kw_only=True)
class AdminParams:
    """Apply ``action`` to one job; ``note`` is the operator's, appended to the journal note.

    ``actor`` names who acted (e.g. ``"alice via web"``); None journals it as ``operator``.
    """

    job_id: str
    action: AdminAction
    note: str | None = None
    actor: str | None = None


@dataclass(frozen=True, kw_only=True)
class AdminResult:
    """What :func:`apply` found and did.

    ``job`` is None when there is no such job.  Otherwise ``applied`` says
    whether the transition happened; ``job`` is the row afterwards when it
    did, and the row as found (its status forbade the action) when not.
    """

    job: sa.Row[Any] | None
    applied: bool = False


def lock_statement(models: Models, job_id: str, *, key_share: bool = False, lock: bool = True) -> sa.Select[Any]:
    """The whole row, locked ``FOR UPDATE`` (waits for a worker's outcome write in progress).

    With ``key_share`` it is locked ``FOR KEY SHARE``: it still waits for an
    outcome write (which locks ``FOR UPDATE`` first) and holds the next one
    back, but not the lease renewal of a running job (``FOR NO KEY UPDATE
    SKIP LOCKED``): what a caller's transaction that may stay open takes on
    a job that may be running.  Without ``lock`` it is read, not locked.
    """
    job = models.Job
    stmt = _select(*job_columns(models)).where(job.id == job_id)
    return stmt.with_for_update(read=key_share, key_share=key_share) if lock else stmt


def _values(action: AdminAction) -> dict[str, Any]:
    now = sa.func.clock_timestamp()
    cleared: dict[str, Any] = {"status": action.to_status.value, "claimed_by": None,
                               "claim_expires_at": None}
    if action.to_status.terminal:
        return {**cleared, "finished_at": now}
    values = {**cleared, "visible_at": now, "finished_at": None}
    if action is REQUEUE:
        values["failure_count"] = 0  # a fresh set of tries before the backstop
    return values


def journal_note(action: AdminAction, note: str | None, actor: str | None = None) -> str:
    head = f"{action.verb} by {actor or 'operator'}"
    return f"{head}: {note}" if note else head


def apply(models: Models, runner: Runner, params: AdminParams) -> AdminResult:
    """Lock the row, and apply the transition if it has the action's ``from_status``.

    Writes the journal row only when the row changed.  The caller commits;
    a refused action changes nothing (the row stays locked until the caller's
    transaction ends).
    """
    current = runner.execute(lock_statement(models, params.job_id)).first()
    if current is None or current.status != params.action.from_status.value:
        return AdminResult(job=current)
    row = _transition(models, runner, params)
    return AdminResult(job=row if row is not None else current, applied=row is not None)


def guarded_write(models: Models, runner: Runner, job_id: str, expected: Status, values: dict[str, Any],
                  outcome: Outcome, note: str, actor: str | None = None) -> sa.Row[Any] | None:
    """Update the job with ``values`` if it still has status ``expected`` (repeated in the ``WHERE``), and
    journal ``outcome`` with ``note`` (``run_no`` = its ``run_count``).

    A job that ends ``dead`` here is owed an ``on_dead`` call
    (``<prefix>_on_dead``, in the same transaction) and its cancel request
    goes.  A job that leaves ``claimed`` (release, cancel or kill of an
    expired claim) wakes the queue's workers on commit: its slot under a
    limit is free.  Returns the row afterwards, or None if the guard failed
    (nothing written).  Every operator action on a job writes through here, after
    locking the row ``FOR UPDATE`` (a job that ends ``dead`` here settles its
    dependents, which must wait for the ``FOR KEY SHARE`` of ``after=``
    enqueues naming it: ``storage/dependents.py``).
    """
    job = models.Job
    row = runner.execute(
        sa.update(job)
        .where(job.id == job_id, job.status == expected.value)
        .values(values)
        .returning(*job_columns(models))
        .execution_options(synchronize_session=False)
    ).first()
    if row is None:
        return None
    runner.execute(sa.insert(models.JournalEntry).values(
        job_id=row.id, kind=row.kind, run_no=row.run_count, outcome=outcome.value, note=note, attachment=None))
    if row.status == Status.DEAD.value:
        runner.execute(sa.insert(models.on_dead_table).values(
            job_id=row.id, kind=row.kind, run_no=row.run_count, note=note, actor=actor or "operator",
            created_at=sa.func.now(), not_before=sa.func.now()))
        cancels = models.cancels_table
        runner.execute(sa.delete(cancels).where(cancels.c.job_id == row.id))
        dependents.settle(models, runner, [row.id])
    elif expected is Status.DEAD:
        dependents.rearm(models, runner, row.id)
    if expected is Status.CLAIMED:  # a slot under the kind's limits is free: waiting workers claim at once
        runner.execute(drivers.notify_statement(models.names.channel))
    return row


def _transition(models: Models, runner: Runner, params: AdminParams) -> sa.Row[Any] | None:
    """The guarded UPDATE and its journal row; None (nothing written) if the status guard fails."""
    action = params.action
    row = guarded_write(models, runner, params.job_id, action.from_status, _values(action), action.outcome,
                        journal_note(action, params.note, params.actor), params.actor)
    if row is None:
        return None
    if action is REQUEUE:  # a requeued job starts afresh: an old cancel request must not end its next run
        request = models.CancelRequest
        runner.execute(sa.delete(request).where(request.job_id == row.id).execution_options(
            synchronize_session=False))
    return row
