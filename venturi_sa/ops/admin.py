"""Operator actions on one job: requeue a dead job, kill a pending one, release a claimed one.

Each action is one short transaction that locks the job's row, checks its
status, changes it and appends one journal row with the operator's note.  On
commit both the change and its journal row exist; a refused action (unknown
job, or a status the action does not apply to) or any error rolls back and
changes nothing; a crash before commit leaves the job as it was.  A worker still running a released
job finds its fence broken and its outcome is discarded.  ``actor`` (who acted,
e.g. the dashboard's user) is written into the journal note; None reads ``operator``.
"""

from __future__ import annotations

import sqlalchemy as sa

from venturi_sa.errors import InvalidTransition
from venturi_sa.models import Models
from venturi_sa.ops.history import job_not_found
from venturi_sa.ops.records import JobInfo
from venturi_sa.ops.transaction import short_transaction
from venturi_sa.owed_calls import make_owed_calls
from venturi_sa.states import Status
from venturi_sa.storage import admin as admin_store
from venturi_sa.storage import archive as archiving
from venturi_sa.storage import archive_reads, dependents
from venturi_sa.storage import steps as step_store
from venturi_sa.storage.admin import KILL, RELEASE, REQUEUE, AdminAction, AdminParams
from venturi_sa.task import Registry

_HINTS = {
    Status.PENDING.value: "kill stops a pending job",
    Status.CLAIMED.value: "release returns a claimed job whose worker is gone",
    Status.DEAD.value: "requeue runs a dead job again",
    Status.COMPLETED.value: "a completed job is final",
}


def _admin(models: Models, engine: sa.Engine, job_id: str, action: AdminAction,
           note: str | None, actor: str | None, registry: Registry | None = None,
           with_dependents: bool = False, reset_steps: bool = False) -> JobInfo:
    """Apply ``action`` in one transaction; ``JobNotFound`` or ``InvalidTransition`` if it cannot."""
    params = AdminParams(job_id=job_id, action=action, note=note, actor=actor)
    with short_transaction(models, engine) as session:
        if action is REQUEUE:
            archiving.restore(models, session, job_id)  # an archived dead job comes back, then is requeued
        result = admin_store.apply(models, session, params)
        if result.job is None:
            status = archive_reads.archived_status(models, session, job_id)
            if status is None:
                raise job_not_found(models, job_id)
            raise InvalidTransition(f"cannot {action.name} job {job_id}: it is {status} (archived), and "
                                    f"{action.name} applies only to {action.from_status.value} jobs")
        if not result.applied:
            status = result.job.status
            raise InvalidTransition(
                f"cannot {action.name} job {job_id}: it is {status}, and {action.name} "
                f"applies only to {action.from_status.value} jobs ({_HINTS[status]})")
        if with_dependents:  # the dependents its death killed (archived ones moved back) wait for it again
            dependents.rearm(models, session, job_id, with_dependents=True,
                             restore=lambda parents: archiving.restore_killed(models, session, parents))
        if registry is not None and result.job.status == Status.DEAD.value:
            make_owed_calls(session, models, registry, job_ids=[job_id])
        if reset_steps:
            step_store.reset(models, session, job_id)  # the handler's steps, sleeps and waits run afresh
        return JobInfo(**result.job._mapping)


def requeue(models: Models, engine: sa.Engine, job_id: str, note: str | None = None,
            actor: str | None = None, with_dependents: bool = False, reset_steps: bool = False) -> JobInfo:
    """``dead`` → ``pending``, visible now, ``failure_count`` reset to 0; journaled ``released``.

    Its dependents still waiting count it as unfinished again; with
    ``with_dependents`` the dependents its death killed are requeued too
    (waiting for it again; archived ones are moved back first), in the same
    transaction.  The job's recorded
    steps are kept (they replay), unless ``reset_steps`` deletes them in the
    same transaction.
    """
    return _admin(models, engine, job_id, REQUEUE, note, actor, with_dependents=with_dependents,
                  reset_steps=reset_steps)


def kill(models: Models, engine: sa.Engine, job_id: str, note: str | None = None,
         actor: str | None = None, registry: Registry | None = None) -> JobInfo:
    """``pending`` → ``dead`` with ``finished_at`` set; journaled ``dead``.

    The task's ``on_dead`` runs exactly once: in this transaction when
    ``registry`` has the job's kind (the queue's own calls pass it), else in
    the next worker of that kind (see :mod:`venturi_sa.owed_calls`).
    """
    return _admin(models, engine, job_id, KILL, note, actor, registry)


def release(models: Models, engine: sa.Engine, job_id: str, note: str | None = None,
            actor: str | None = None) -> JobInfo:
    """``claimed`` → ``pending``, visible now, claim cleared, no failure counted; journaled ``released``."""
    return _admin(models, engine, job_id, RELEASE, note, actor)
