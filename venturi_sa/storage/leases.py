"""Leases: renewal by the worker that holds them, recovery by any worker once expired."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session

from venturi_sa.models import Models
from venturi_sa.states import Outcome, Status
from venturi_sa.storage.params import RecoveredJob, RecoverParams, RenewParams


def renew(models: Models, session: Session, params: RenewParams) -> int:
    """Push the lease of each still-held run to now + ``lease``; returns rows renewed."""
    if not params.runs:
        return 0
    job = models.Job
    result = session.execute(
        sa.update(job)
        .where(
            sa.tuple_(job.id, job.run_count).in_([tuple(run) for run in params.runs]),
            job.status == Status.CLAIMED.value,
            job.claimed_by == params.worker_id,
        )
        .values(claim_expires_at=sa.func.clock_timestamp() + sa.literal(params.lease, sa.Interval))
        .execution_options(synchronize_session=False)
    )
    return int(result.rowcount)  # type: ignore[attr-defined]


def _max_failures_expr(models: Models, params: RecoverParams) -> Any:
    if not params.max_failures:
        return sa.literal(params.default_max_failures)
    return sa.case(dict(params.max_failures), value=models.Job.kind,
                   else_=sa.literal(params.default_max_failures))


def recover(models: Models, session: Session, params: RecoverParams) -> list[RecoveredJob]:
    """Return expired claims to ``pending`` (``dead`` at the backstop), journaling each.

    Uses SKIP LOCKED, so concurrent recoverers and a worker finishing the
    same job never wait on each other; a finishing worker whose row was
    recovered first finds its fence broken and writes nothing.
    """
    job = models.Job
    stale = (
        sa.select(job.id, job.claimed_by)
        .where(job.status == Status.CLAIMED.value, job.claim_expires_at < sa.func.now())
        .order_by(job.claim_expires_at)
        .limit(params.limit)
        .with_for_update(skip_locked=True)
        .cte("stale")
        .prefix_with("MATERIALIZED")
    )
    at_backstop = job.failure_count + 1 >= _max_failures_expr(models, params)
    now = sa.func.clock_timestamp()
    rows = session.execute(
        sa.update(job)
        .where(job.id == stale.c.id)
        .values(
            failure_count=job.failure_count + 1,
            status=sa.case((at_backstop, Status.DEAD.value), else_=Status.PENDING.value),
            finished_at=sa.case((at_backstop, now), else_=None),
            visible_at=sa.case((at_backstop, job.visible_at), else_=now),
            claimed_by=None,
            claim_expires_at=None,
        )
        .returning(job.id, job.kind, job.run_count, job.status, stale.c.claimed_by)
        .execution_options(synchronize_session=False)
    ).all()
    recovered = [
        RecoveredJob(id=r.id, kind=r.kind, run_count=r.run_count, dead=r.status == Status.DEAD.value,
                     claimed_by=r.claimed_by)
        for r in rows
    ]
    if recovered:
        session.execute(
            sa.insert(models.JournalEntry),
            [
                {
                    "job_id": r.id,
                    "kind": r.kind,
                    "run_no": r.run_count,
                    "outcome": Outcome.STALE_RECOVERED.value,
                    "note": f"lease of {r.claimed_by} expired"
                    + ("; dead at max_failures" if r.dead else "; back to pending"),
                    "attachment": None,
                }
                for r in recovered
            ],
        )
    return recovered
