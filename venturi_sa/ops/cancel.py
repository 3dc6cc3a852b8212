"""Cancel jobs: one, or every pending or claimed job of a kind.

Each function runs in one short transaction on an ``Engine`` (committed on
return, rolled back on any error, so a refused or failed action changes
nothing), except :func:`cancel` given a ``Session``: it then joins the
caller's transaction and never commits, so an enqueue and its cancel can
commit (or roll back) together.  Each cancelled job gets one journal row
naming the actor and the note.  A crash before commit leaves everything as
it was.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session

from venturi_sa.errors import InvalidTransition
from venturi_sa.models import Models
from venturi_sa.ops.checks import DEFAULT_ACTOR, check_text
from venturi_sa.ops.history import job_not_found
from venturi_sa.ops.transaction import short_transaction
from venturi_sa.owed_calls import make_owed_calls
from venturi_sa.states import Status
from venturi_sa.storage import archive_reads
from venturi_sa.storage import cancels as cancels_store
from venturi_sa.storage.cancels import CancelParams
from venturi_sa.storage.params import Runner
from venturi_sa.task import Registry


@dataclass(frozen=True)
class Cancelled:
    """What a cancel did: ``"cancelled"`` (a pending job is ``dead`` now), ``"requested"`` (a claimed
    job's worker ends the run as cancelled-dead once its next lease renewal reads the request) or, for a
    cancel ``with_dependents`` of a job that had already ended, ``"ended"`` (``status`` is the job's own;
    its dependents not yet ended were cancelled)."""

    job_id: str
    kind: str
    status: str  # the job's status after the cancel
    result: str

    def as_dict(self) -> dict[str, Any]:
        return {"job_id": self.job_id, "kind": self.kind, "status": self.status, "result": self.result}


def cancel_in(models: Models, runner: Runner, job_id: str, note: str | None, actor: str,
              registry: Registry | None = None) -> Cancelled:
    """Cancel one job in ``runner``'s transaction (see :func:`cancel`)."""
    params = CancelParams(job_id=job_id, actor=check_text(actor, "actor", required=True) or actor,
                                  note=check_text(note, "note"))
    result = cancels_store.cancel(models, runner, params)
    if result.job is None:
        status = archive_reads.archived_status(models, runner, job_id)
        if status is not None:
            raise InvalidTransition(f"cannot cancel job {job_id}: it is already {status} (archived)")
        raise job_not_found(models, job_id)
    if result.done:
        if registry is not None and isinstance(runner, Session):
            make_owed_calls(runner, models, registry, job_ids=[job_id])
        return Cancelled(job_id, result.job.kind, Status.DEAD.value, "cancelled")
    if result.requested:
        return Cancelled(job_id, result.job.kind, Status.CLAIMED.value, "requested")
    raise InvalidTransition(f"cannot cancel job {job_id}: it is already {result.job.status}")


def cancel(models: Models, bind: sa.Engine | Session, job_id: str, note: str | None = None,
           actor: str = DEFAULT_ACTOR, registry: Registry | None = None) -> Cancelled:
    """Cancel a job: a pending one ends ``dead`` now; a claimed one gets a durable cancel request.

    The holding worker delivers the request at its next lease renewal (at
    once through ``NOTIFY`` when it listens): ``ctx.cancelled`` turns true
    and an ``async def`` handler's task is cancelled.  When the handler
    returns (a sync one must check ``ctx.cancelled`` to stop early), the run
    ends ``dead`` with a "cancelled by" note and its ``ctx.session`` work
    rolled back.  If the run
    finishes first, its own outcome stands (exactly one outcome is written);
    if it ends retried, paused or released, or its worker dies, before the
    request reaches it, the job ends ``dead`` as cancelled all the same.
    A job that ends ``dead`` gets its task's ``on_dead`` once: here, in this
    transaction, when ``registry`` has its kind (the queue's own calls pass
    it), else in the next worker of that kind.  Given a ``Session``, runs in
    its transaction and never commits.  Raises ``JobNotFound``, or
    ``InvalidTransition`` for a job already completed or dead.
    """
    if isinstance(bind, Session):
        return cancel_in(models, bind, job_id, note, actor, registry)
    with short_transaction(models, bind) as session:
        return cancel_in(models, session, job_id, note, actor, registry)


def cancel_kind(models: Models, engine: sa.Engine, kind: str, note: str | None = None,
                actor: str = DEFAULT_ACTOR, limit: int = 10_000, registry: Registry | None = None) -> list[Cancelled]:
    """Cancel every pending or claimed job of ``kind`` (up to ``limit``), in one transaction."""
    check_text(kind, "kind", required=True)
    with short_transaction(models, engine) as session:
        ids = cancels_store.non_terminal_ids(models, session, kind=kind, limit=limit)
        done = []
        for job_id in ids:
            try:
                done.append(cancel_in(models, session, job_id, note, actor, registry))
            except InvalidTransition:
                continue  # finished meanwhile
        return done
