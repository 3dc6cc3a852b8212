"""Recovery of expired leases by any worker: a claim whose worker is gone goes back to ``pending``
(``dead`` at the kind's backstop, or when a cancel request waits for it)."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from venturi_sa.models import Models
from venturi_sa.states import Outcome, Status
from venturi_sa.storage import dependents
from venturi_sa.storage.outcomes import clear_cancels, owe_on_dead, undelivered_cancel
from venturi_sa.storage.params import RecoveredJob, RecoverParams, Runner


def _max_failures_expr(models: Models, params: RecoverParams) -> Any:
    return sa.case(dict(params.max_failures), value=models.Job.kind)


def recover(models: Models, session: Runner, params: RecoverParams) -> list[RecoveredJob]:
    """Return expired claims to ``pending`` (``dead`` at the backstop), journaling each; returns what it recorded.

    Only kinds in ``params.max_failures`` are recovered, each against its
    own backstop.  A recovery always sends its job back, so a job with an
    undelivered cancel request ends ``dead`` instead, journaled as cancelled
    by the request's actor (the rule of
    :func:`venturi_sa.storage.outcomes.undelivered_cancel`).  Every job that
    ends ``dead`` here is owed an ``on_dead`` call (``<prefix>_on_dead``: a
    worker of its kind makes it), and its cancel request goes.  Each
    :class:`RecoveredJob` carries the outcome its journal row records
    (``stale-recovered``, or ``dead`` for a cancel), read from the
    statement's own ``RETURNING``.  Nothing is committed here: the caller's
    commit keeps it all, a rollback or crash leaves the claims to the next
    recovery.  Locks ``FOR UPDATE SKIP LOCKED``, so concurrent recoverers
    and a worker finishing the same job never wait on each other; a
    finishing worker whose row was recovered first finds its fence broken
    and writes nothing.  ``FOR UPDATE`` also skips a job a caller's
    transaction holds ``FOR KEY SHARE`` (an ``after=`` enqueue naming it, a
    signal, a cancel): it is recovered once that transaction has ended, so
    the settle that follows sees the dependency rows it wrote.
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
    requested = undelivered_cancel(sa.true(), stale.c.cancel_actor, stale.c.cancel_note)  # in the UPDATE
    ends_dead = sa.or_(job.failure_count + 1 >= _max_failures_expr(models, params), requested.applies)
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
    cancel = undelivered_cancel(sa.true(), returned.c.cancel_actor, returned.c.cancel_note)  # after it
    lease_note = (sa.literal("lease of ") + sa.func.coalesce(returned.c.claimed_by, "?") + " expired"
                  + sa.case((dead, "; dead at max_failures"), else_="; back to pending"))
    note = cancel.note(sa.literal("before the cancel was delivered, the lease of ", sa.Text)
                       + sa.func.coalesce(returned.c.claimed_by, "?") + " expired", lease_note)
    outcome = cancel.outcome(Outcome.STALE_RECOVERED.value)
    logged = sa.insert(models.journal_table).from_select(
        ["job_id", "kind", "run_no", "outcome", "note", "attachment"],
        sa.select(returned.c.id, returned.c.kind, returned.c.run_count, outcome, note, sa.null()),
    ).cte("logged")
    ended = sa.select(returned.c.id, returned.c.kind, returned.c.run_count, note.label("note"),
                      sa.func.coalesce(returned.c.cancel_actor, returned.c.claimed_by, "venturi").label("actor")
                      ).where(dead).cte("ended")
    owed = owe_on_dead(models, ended, now).cte("owed")
    cleared = clear_cancels(models, ended).cte("cleared")
    # One statement: the journal rows, owed calls and cleared requests are written by data-modifying CTEs.
    rows = session.execute(
        sa.select(returned.c.id, returned.c.kind, returned.c.run_count, dead.label("dead"), returned.c.claimed_by,
                  outcome.label("outcome"))
        .add_cte(logged, ended, owed, cleared)
    ).all()
    dependents.settle(models, session, [r.id for r in rows if r.dead])
    return [RecoveredJob(id=r.id, kind=r.kind, run_count=r.run_count, dead=r.dead, claimed_by=r.claimed_by,
                         outcome=Outcome(r.outcome)) for r in rows]
