"""A job's parents and dependents (``after=``), and the operator actions that follow dependencies.

Reads run in one short transaction (:func:`parents` given the caller's
``Session`` or ``Connection``: in its transaction, never committed).
:func:`cancel_with_dependents` cancels
a job and every transitive dependent in one transaction (committed on
return, rolled back on any error; joined, never committed, when given a
``Session``); each cancelled job gets its own journal row.  It locks the job
first and its dependents after it, in id order: the order in which the
job's own terminal write locks them (its row, then its dependents'), so the
two never deadlock.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.orm import Session

from venturi_sa.errors import InvalidTransition
from venturi_sa.models import Models
from venturi_sa.ops.cancel import Cancelled, cancel_in
from venturi_sa.ops.history import job_not_found
from venturi_sa.ops.transaction import reading, short_transaction
from venturi_sa.storage import archive_reads
from venturi_sa.storage import cancels as cancels_store
from venturi_sa.storage import dependent_reads as reads
from venturi_sa.storage import dependents as dependents_store
from venturi_sa.storage import history as history_store
from venturi_sa.storage.dependent_reads import DependentsParams
from venturi_sa.storage.durable_params import ParentInfo as ParentInfo  # ctx.parents, queue.parents
from venturi_sa.storage.durable_params import ParentsParams
from venturi_sa.storage.faults import is_deadlock
from venturi_sa.storage.history import JobParams
from venturi_sa.storage.params import Runner
from venturi_sa.task import Registry

PARENTS_BATCH = 1000
"""How many parents one read of :func:`iter_parents` (and ``ctx.iter_parents()``) fetches."""


@dataclass(frozen=True)
class DependentInfo:
    """One job that named this job in ``after=``, with the policy it applies if this job ends dead."""

    id: str
    kind: str
    status: str
    if_parent_dead: str


def parent_rows(models: Models, runner: Runner, job_id: str, offset: int = 0,
                limit: int | None = None) -> list[ParentInfo]:
    """The parents at positions ``offset``.. of ``job_id``, in ``after=`` order, read in ``runner``."""
    return reads.parents(models, runner, ParentsParams(job_id=job_id, offset=offset, limit=limit))


def _known(models: Models, session: Runner, job_id: str) -> None:
    if history_store.fetch_job(models, session, JobParams(job_id=job_id)) is None:
        if archive_reads.archived_status(models, session, job_id) is None:
            raise job_not_found(models, job_id)


def parents(models: Models, bind: sa.Engine | Runner, job_id: str) -> list[ParentInfo]:
    """The job's parents in the order ``after=`` gave them; ``JobNotFound`` for no such job.

    ``bind``: see :func:`~venturi_sa.ops.transaction.reading`.
    """
    with reading(models, bind) as session:
        _known(models, session, job_id)
        return parent_rows(models, session, job_id)


def iter_parents(models: Models, engine: sa.Engine, job_id: str, batch: int = PARENTS_BATCH) -> Iterator[ParentInfo]:
    """The job's parents in order, read ``batch`` at a time (one short transaction per batch)."""
    offset = 0
    while True:
        with short_transaction(models, engine) as session:
            rows = parent_rows(models, session, job_id, offset, batch)
        yield from rows
        if len(rows) < batch:
            return
        offset += batch


def dependents(models: Models, engine: sa.Engine, job_id: str) -> list[DependentInfo]:
    """The jobs waiting for (or that waited for) ``job_id``, oldest first; ``JobNotFound`` for no such job."""
    with short_transaction(models, engine) as session:
        _known(models, session, job_id)
        return [DependentInfo(id=r.id, kind=r.kind, status=r.status, if_parent_dead=r.policy)
                for r in reads.dependents(models, session, DependentsParams(job_id=job_id))]


def refuse_waiting(models: Models, runner: Runner, job_id: str, what: str) -> None:
    """``InvalidTransition`` naming the unfinished parents if ``job_id`` waits for any (``what``: the change)."""
    waiting = reads.waiting(models, runner, job_id)
    if waiting is not None and waiting.remaining > 0:
        shown = ", ".join(waiting.unfinished) + (", ..." if waiting.remaining > len(waiting.unfinished) else "")
        raise InvalidTransition(f"cannot {what} job {job_id}: it waits for {waiting.remaining} of its "
                                f"{waiting.total} parents ({shown}); it runs when they have ended")


def waiting_text(models: Models, runner: Runner, job_id: str) -> str | None:
    """``explain``'s ``waiting_on_parents`` sentence if ``job_id`` waits for parents, else None."""
    waiting = reads.waiting(models, runner, job_id)
    if waiting is None or waiting.remaining <= 0:
        return None
    shown = ", ".join(waiting.unfinished) + (", ..." if waiting.remaining > len(waiting.unfinished) else "")
    return (f"waiting for {waiting.remaining} of {waiting.total} parents: {shown} (it becomes eligible when "
            "the last of them completes or dies)")


def cancel_with_dependents(models: Models, runner: Runner, job_id: str, note: str | None, actor: str,
                           registry: Registry | None = None) -> Cancelled:
    """Cancel ``job_id`` and every transitive dependent not yet terminal, whatever its policy.

    The job is locked first, as a cancel locks it (``storage.cancels.hold``:
    its terminal outcome waits for this transaction, a running job's lease
    renewal does not), then its dependents
    are read and cancelled in id order (a pending one ends ``dead`` now, a
    claimed one gets a cancel request), each journaled with a note naming
    the job; then the job itself, as :func:`~venturi_sa.ops.cancel.cancel`.
    If the job had already ended (its completion committed first, and may
    have released them), its dependents not yet ended are cancelled all the
    same and the result is ``"ended"`` with the job's status; with none to
    cancel it raises ``InvalidTransition`` and nothing is written.
    """
    held = cancels_store.hold(models, runner, job_id)
    if held is None:  # archived or unknown: raises, naming which
        return cancel_in(models, runner, job_id, note, actor, registry)
    cancelled = 0
    for dependent in dependents_store.downstream(models, runner, job_id):
        try:
            cancel_in(models, runner, dependent, f"with its parent {job_id}" + (f": {note}" if note else ""),
                      actor, registry)
            cancelled += 1
        except InvalidTransition:
            continue  # it finished meanwhile
    try:
        return cancel_in(models, runner, job_id, note, actor, registry)
    except InvalidTransition:
        if not cancelled:
            raise
        ended = cancels_store.hold(models, runner, job_id)
        return Cancelled(job_id, held.kind, ended.status if ended is not None else held.status, "ended")


DEADLOCK_TRIES = 3
"""How many times the ``Engine`` form of :func:`cancel` runs its transaction when PostgreSQL breaks a deadlock."""


def cancel(models: Models, bind: sa.Engine | Session, job_id: str, note: str | None, actor: str,
           registry: Registry | None = None) -> Cancelled:
    """:func:`cancel_with_dependents` in ``bind``'s transaction (a Session) or a short one (an Engine).

    Given an ``Engine``, a transaction that PostgreSQL rolled back to break a
    deadlock (another transaction locking the same jobs in another order)
    is run again from the start, up to ``DEADLOCK_TRIES`` times in all;
    given a ``Session``, the deadlock error is raised and the caller's
    transaction must be rolled back.
    """
    if isinstance(bind, Session):
        return cancel_with_dependents(models, bind, job_id, note, actor, registry)
    for attempt in range(1, DEADLOCK_TRIES + 1):
        try:
            with short_transaction(models, bind) as session:
                return cancel_with_dependents(models, session, job_id, note, actor, registry)
        except sa.exc.DBAPIError as exc:
            if not is_deadlock(exc) or attempt == DEADLOCK_TRIES:
                raise
    raise AssertionError("unreachable")
