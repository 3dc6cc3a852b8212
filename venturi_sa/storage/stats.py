"""Queue statistics: on-demand aggregates, each served by a seed index.

Three statements, meant to run in one REPEATABLE READ transaction so the
counts share one snapshot and one ``now()``:

- counts by ``(status, kind)``: an index-only scan of ``_jobs_history``;
- pending by kind split at ``now()``, with the oldest eligible ``visible_at``:
  the partial ``_jobs_visible (kind, visible_at) WHERE status = 'pending'``;
- expired leases by kind: the partial ``_jobs_lease WHERE status = 'claimed'``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session

from venturi_sa.models import Models
from venturi_sa.states import Status


@dataclass(frozen=True, kw_only=True)
class PendingRow:
    kind: str
    eligible: int
    scheduled: int
    oldest_eligible_age: timedelta | None


@dataclass(frozen=True, kw_only=True)
class StatsRows:
    """Raw aggregates as read; :mod:`venturi_sa.introspection` shapes them."""

    as_of: datetime
    counts: Sequence[tuple[str, str, int]]  # (status, kind, count)
    pending: Sequence[PendingRow] = field(default_factory=list)
    expired: Sequence[tuple[str, int]] = field(default_factory=list)  # (kind, count)


def counts_statement(models: Models) -> sa.Select[Any]:
    job = models.Job
    return sa.select(job.status, job.kind, sa.func.count()).group_by(job.status, job.kind)


def pending_statement(models: Models) -> sa.Select[Any]:
    job = models.Job
    now = sa.func.now()
    eligible = job.visible_at <= now
    return (
        sa.select(
            job.kind,
            sa.func.count().filter(eligible),
            sa.func.count().filter(sa.not_(eligible)),
            now - sa.func.min(job.visible_at).filter(eligible),
        )
        .where(job.status == Status.PENDING.value)
        .group_by(job.kind)
    )


def expired_statement(models: Models) -> sa.Select[Any]:
    job = models.Job
    return (
        sa.select(job.kind, sa.func.count())
        .where(job.status == Status.CLAIMED.value, job.claim_expires_at < sa.func.now())
        .group_by(job.kind)
    )


def read_stats(models: Models, session: Session) -> StatsRows:
    """Run the three aggregates in ``session`` (the caller picks the isolation level)."""
    as_of = session.execute(sa.select(sa.func.now())).scalar_one()
    counts = [(r[0], r[1], int(r[2])) for r in session.execute(counts_statement(models))]
    pending = [
        PendingRow(kind=r[0], eligible=int(r[1]), scheduled=int(r[2]), oldest_eligible_age=r[3])
        for r in session.execute(pending_statement(models))
    ]
    expired = [(r[0], int(r[1])) for r in session.execute(expired_statement(models))]
    return StatsRows(as_of=as_of, counts=counts, pending=pending, expired=expired)
