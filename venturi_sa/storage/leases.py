"""Leases: renewal by the worker that holds them, recovery by any worker once expired."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from venturi_sa.models import Models
from venturi_sa.states import Outcome, Status
from venturi_sa.storage.control import cancel_note
from venturi_sa.storage.outcomes import cancel_text, clear_cancels, owe_on_dead
from venturi_sa.storage.params import RecoveredJob, RecoverParams, RenewParams, RenewResult, Runner


def _held_rows() -> Any:
    return sa.func.unnest(
        sa.bindparam("held_ids", type_=postgresql.ARRAY(sa.Text)),
        sa.bindparam("held_runs", type_=postgresql.ARRAY(sa.Integer)),
    ).table_valued("id", "run_count").render_derived(name="held")


_RENEW: dict[tuple[str, int], Any] = {}


def _renew_statement(models: Models) -> Any:
    """Renew the held runs that are not row-locked; report, per held run, renewed and still ours.

    ``FOR UPDATE SKIP LOCKED``: a row that this worker's own outcome write
    (or anyone else) has locked is skipped, never waited for, so renewal
    cannot deadlock with a batched outcome write.  ``ours`` is read from the
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
        .with_for_update(skip_locked=True, of=table)
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


def _max_failures_expr(models: Models, params: RecoverParams) -> Any:
    return sa.case(dict(params.max_failures), value=models.Job.kind)


def recover(models: Models, session: Runner, params: RecoverParams) -> list[RecoveredJob]:
    """Return expired claims to ``pending`` (``dead`` at the backstop), journaling each.

    Only kinds in ``params.max_failures`` are recovered, each against its
    own backstop.  A job with an undelivered cancel request ends ``dead``,
    journaled as cancelled by the request's actor.  Every job that ends
    ``dead`` here is owed an ``on_dead`` call (``<prefix>_on_dead``: a worker
    of its kind makes it), and its cancel request goes.  Uses SKIP LOCKED,
    so concurrent recoverers and a worker finishing the same job never wait
    on each other; a finishing worker whose row was recovered first finds
    its fence broken and writes nothing.
    """
    if not params.max_failures:
        return []
    job = models.Job
    cancels = models.cancels_table.c
    stale = (  # with the job's cancel request, if one is stored (the row lock is the job's only)
        sa.select(job.id, job.claimed_by, cancels.actor.label("cancel_actor"), cancels.note.label("cancel_note"))
        .outerjoin(models.cancels_table, cancels.job_id == job.id)
        .where(job.status == Status.CLAIMED.value, job.claim_expires_at < sa.func.now(),
               job.kind.in_(sorted(params.max_failures)))
        .order_by(job.claim_expires_at)
        .limit(params.limit)
        .with_for_update(skip_locked=True, of=models.jobs_table)
        .cte("stale")
        .prefix_with("MATERIALIZED")
    )
    ends_dead = sa.or_(job.failure_count + 1 >= _max_failures_expr(models, params), stale.c.cancel_actor.is_not(None))
    now = sa.func.clock_timestamp()
    returned = (
        sa.update(job)
        .where(job.id == stale.c.id)
        .values(
            failure_count=job.failure_count + 1,
            status=sa.case((ends_dead, Status.DEAD.value), else_=Status.PENDING.value),
            finished_at=sa.case((ends_dead, now), else_=None),
            visible_at=sa.case((ends_dead, job.visible_at), else_=now),
            claimed_by=None,
            claim_expires_at=None,
        )
        .returning(job.id, job.kind, job.run_count, job.status, stale.c.claimed_by, stale.c.cancel_actor,
                   stale.c.cancel_note)
        .cte("recovered")
    )
    dead = returned.c.status == Status.DEAD.value
    by_cancel = returned.c.cancel_actor.is_not(None)
    lease_note = (sa.literal("lease of ") + sa.func.coalesce(returned.c.claimed_by, "?") + " expired"
                  + sa.case((dead, "; dead at max_failures"), else_="; back to pending"))
    note = sa.case((by_cancel, cancel_text(
        returned.c.cancel_actor, returned.c.cancel_note,
        sa.literal("before the cancel was delivered, the lease of ", sa.Text)
        + sa.func.coalesce(returned.c.claimed_by, "?") + " expired")), else_=lease_note)
    logged = sa.insert(models.journal_table).from_select(
        ["job_id", "kind", "run_no", "outcome", "note", "attachment"],
        sa.select(returned.c.id, returned.c.kind, returned.c.run_count,
                  sa.case((by_cancel, Outcome.DEAD.value), else_=Outcome.STALE_RECOVERED.value), note, sa.null()),
    ).cte("logged")
    ended = sa.select(returned.c.id, returned.c.kind, returned.c.run_count, note.label("note"),
                      sa.func.coalesce(returned.c.cancel_actor, returned.c.claimed_by, "venturi").label("actor")
                      ).where(dead).cte("ended")
    owed = owe_on_dead(models, ended, now).cte("owed")
    cleared = clear_cancels(models, ended).cte("cleared")
    # One statement: the journal rows, owed calls and cleared requests are written by data-modifying CTEs.
    rows = session.execute(
        sa.select(returned.c.id, returned.c.kind, returned.c.run_count, dead.label("dead"), returned.c.claimed_by)
        .add_cte(logged, ended, owed, cleared)
    ).all()
    return [RecoveredJob(id=r.id, kind=r.kind, run_count=r.run_count, dead=r.dead, claimed_by=r.claimed_by)
            for r in rows]
