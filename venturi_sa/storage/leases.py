"""Lease renewal by the worker that holds the runs, which also reads their cancel requests.

Recovery of expired leases is ``storage/recovery.py``.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from venturi_sa.models import Models
from venturi_sa.states import Status
from venturi_sa.storage.cancels import cancel_note
from venturi_sa.storage.params import RenewParams, RenewResult, Runner


def _held_rows() -> Any:
    return sa.func.unnest(
        sa.bindparam("held_ids", type_=postgresql.ARRAY(sa.Text)),
        sa.bindparam("held_runs", type_=postgresql.ARRAY(sa.Integer)),
    ).table_valued("id", "run_count").render_derived(name="held")


_RENEW: dict[tuple[str, int], Any] = {}


def _renew_statement(models: Models) -> Any:
    """Renew the held runs that are not row-locked; report, per held run, renewed and still ours.

    ``FOR NO KEY UPDATE SKIP LOCKED``: a row that this worker's own outcome
    write, a recovery or an operator's release has locked (``FOR UPDATE``)
    is skipped, never waited for, so renewal cannot deadlock with a batched
    outcome write.  The ``FOR KEY SHARE`` locks of callers' transactions
    (``after=`` parents, ``queue.signal``, ``queue.cancel`` of a running
    job) do not conflict with it, so however long such a transaction stays
    open, the run keeps its lease.  ``ours`` is read from the
    statement's snapshot: false means the claim is gone (recovered,
    released, reclaimed), i.e. the run lost its lease.
    """
    key = (models.prefix, id(models.Job))
    if key in _RENEW:
        return _RENEW[key]
    table = models.jobs_table
    job = table.c
    held = _held_rows()
    mine = sa.and_(job.status == Status.CLAIMED.value, job.claimed_by == sa.bindparam("worker_id", type_=sa.Text))
    locked = (
        sa.select(job.id)
        .join(held, sa.and_(job.id == held.c.id, job.run_count == held.c.run_count))
        .where(mine)
        .with_for_update(skip_locked=True, key_share=True, of=table)
        .cte("locked")
        .prefix_with("MATERIALIZED")
    )
    renewed = (
        sa.update(table)
        .where(job.id.in_(sa.select(locked.c.id)))
        .values(claim_expires_at=sa.func.clock_timestamp() + sa.bindparam("lease", type_=sa.Interval))
        .returning(job.id)
        .cte("renewed")
    )
    still = sa.exists().where(job.id == held.c.id, job.run_count == held.c.run_count, mine)
    cancels = models.cancels_table.c  # a cancel request rides the renewal round trip (runtime control)
    stmt = sa.select(held.c.id, held.c.run_count, renewed.c.id.is_not(None).label("renewed"),
                     still.label("ours"), cancels.actor.label("cancel_actor"), cancels.note.label("cancel_note")
                     ).select_from(held.outerjoin(renewed, renewed.c.id == held.c.id)
                                   .outerjoin(models.cancels_table, cancels.job_id == held.c.id))
    _RENEW[key] = stmt
    return stmt


def renew(models: Models, session: Runner, params: RenewParams) -> RenewResult:
    """Push the lease of each still-held run to now + ``lease``, without waiting on row locks.

    Returns the renewed runs, the runs that lost their claim and the runs
    with a cancel request (fence -> journal note); a run that
    is neither was row-locked at that moment (e.g. its outcome is being
    written) and keeps its lease until the next renewal.
    """
    if not params.runs:
        return RenewResult()
    by_key = {(f.job_id, f.run_count): f for f in params.runs}
    rows = session.execute(_renew_statement(models), {
        "held_ids": [f.job_id for f in params.runs], "held_runs": [f.run_count for f in params.runs],
        "worker_id": params.worker_id, "lease": params.lease,
    }).all()
    renewed = frozenset(by_key[(r.id, r.run_count)] for r in rows if r.renewed)
    lost = frozenset(by_key[(r.id, r.run_count)] for r in rows if not r.ours)
    cancels = {by_key[(r.id, r.run_count)]: cancel_note(r.cancel_actor, r.cancel_note, running=True)
               for r in rows if r.cancel_actor is not None and r.ours}
    return RenewResult(renewed=renewed, lost=lost, cancels=cancels)
