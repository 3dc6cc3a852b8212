"""Queue statistics: on-demand aggregates, each served by a seed index.

Three statements, meant to run in one REPEATABLE READ transaction so the
counts share one snapshot and one ``now()``:

- counts by ``(status, kind)``: an index-only scan of ``_jobs_history``;
- pending by kind split at ``now()``, with the oldest eligible ``visible_at``:
  the partial ``_jobs_visible (kind, visible_at) WHERE status = 'pending'``;
- expired leases by kind: the partial ``_jobs_lease WHERE status = 'claimed'``;
- pending jobs not due yet by kind and by why they wait (:func:`not_due_counts`):
  the same partial ``_jobs_visible``, with a look at the steps of those jobs only.

Nothing here locks or commits.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa

from venturi_sa.models import Models
from venturi_sa.states import Status
from venturi_sa.storage.params import Runner
from venturi_sa.storage.timestamps import INFINITY


def _select(*columns: Any) -> sa.Select[Any]:
    """``select()`` typed loosely, the same under SQLAlchemy 2.0 and 2.1."""
    return sa.select(*columns)


@dataclass(frozen=True, kw_only=True)
class StatsParams:
    """Options of a stats read.  There are none yet: stats always cover the whole queue.

    :func:`read_stats` takes this object anyway so that every storage function has
    the same shape, and a filter can be added later without changing the signature.
    """


@dataclass(frozen=True, kw_only=True)
class PendingRow:
    """Pending jobs of one kind, split at ``now()``; the age is ``now() - min(visible_at)`` of the eligible."""

    kind: str
    eligible: int
    scheduled: int
    oldest_eligible_age: timedelta | None


@dataclass(frozen=True, kw_only=True)
class StatsRows:
    """Raw aggregates as read, all at ``as_of``; :mod:`venturi_sa.ops.stats` shapes them."""

    as_of: datetime
    counts: Sequence[tuple[str, str, int]]  # (status, kind, count)
    pending: Sequence[PendingRow] = field(default_factory=list)
    expired: Sequence[tuple[str, int]] = field(default_factory=list)  # (kind, count)


# A loose index scan: walk _jobs_history (status, kind, finished_at) from one
# distinct (status, kind) to the next, then count each pair with an index-only
# range scan.  A plain GROUP BY reads the whole heap (every retained terminal
# row, payload and all); this reads only the narrow index.
PAIR_COUNTS = """
WITH RECURSIVE pairs AS (
    (SELECT status, kind FROM {table} ORDER BY status, kind LIMIT 1)
    UNION ALL
    SELECT nxt.status, nxt.kind
    FROM pairs, LATERAL (
        SELECT j.status, j.kind FROM {table} AS j
        WHERE (j.status, j.kind) > (pairs.status, pairs.kind)
        ORDER BY j.status, j.kind LIMIT 1
    ) AS nxt
)
SELECT pairs.status, pairs.kind, counted.n
FROM pairs, LATERAL (
    SELECT count(*) AS n FROM {table} AS j WHERE j.status = pairs.status AND j.kind = pairs.kind
) AS counted
"""


def counts_statement(models: Models) -> sa.TextClause:
    """Rows of ``(status, kind, count)``; the table name comes from the validated prefix."""
    return sa.text(PAIR_COUNTS.format(table=models.names.jobs))


def pending_statement(models: Models) -> sa.Select[Any]:
    job = models.Job
    now = sa.func.now()
    eligible = job.visible_at <= now
    return (
        _select(
            job.kind,
            sa.func.count().filter(eligible),
            sa.func.count().filter(sa.not_(eligible), job.visible_at < INFINITY),  # not waiting
            now - sa.func.min(job.visible_at).filter(eligible),
        )
        .where(job.status == Status.PENDING.value)
        .group_by(job.kind)
    )


def expired_statement(models: Models) -> sa.Select[Any]:
    job = models.Job
    return (
        _select(job.kind, sa.func.count())
        .where(job.status == Status.CLAIMED.value, job.claim_expires_at < sa.func.now())
        .group_by(job.kind)
    )


def read_stats(models: Models, runner: Runner, params: StatsParams) -> StatsRows:
    """Run the three aggregates in ``runner``'s transaction.

    The caller picks the isolation level: under REPEATABLE READ all three
    share one snapshot (and ``now()`` is the transaction's start either way).
    """
    as_of = runner.execute(_select(sa.func.now())).scalar_one()
    counts = [(r[0], r[1], int(r[2])) for r in runner.execute(counts_statement(models))]
    pending = [
        PendingRow(kind=r[0], eligible=int(r[1]), scheduled=int(r[2]), oldest_eligible_age=r[3])
        for r in runner.execute(pending_statement(models))
    ]
    expired = [(r[0], int(r[1])) for r in runner.execute(expired_statement(models))]
    return StatsRows(as_of=as_of, counts=counts, pending=pending, expired=expired)


NOT_DUE_STATES = ("waiting_for_signal", "sleeping", "waiting", "backoff", "scheduled")
"""Why a pending job not due yet waits, first match wins: an open ``ctx.wait_for``, a ``ctx.sleep`` not over,
its parents (``visible_at = 'infinity'`` with no wait), a failure's backoff, or a schedule."""


def not_due_statement(models: Models) -> sa.Select[Any]:
    """Rows of ``(kind, state, count)`` for the pending jobs with ``visible_at > now()`` (see NOT_DUE_STATES).

    ``backoff`` is a job with a failure counted (``failure_count > 0``) and
    no step holding it: an operator's later ``edit(run_at=...)`` of such a
    job still counts there.
    """
    job, step = models.jobs_table.c, models.steps_table.c
    waiting = sa.exists().where(step.job_id == job.id, step.entry == "wait", step.resolution.is_(None))
    sleeping = sa.exists().where(step.job_id == job.id, step.entry == "sleep", step.wake_at > sa.func.now())
    state = sa.case((waiting, "waiting_for_signal"), (sleeping, "sleeping"),
                    (job.visible_at >= INFINITY, "waiting"), (job.failure_count > 0, "backoff"),
                    else_="scheduled").label("state")
    rows = (_select(job.kind, state)
            .where(job.status == Status.PENDING.value, job.visible_at > sa.func.now())
            .subquery())
    return _select(rows.c.kind, rows.c.state, sa.func.count()).group_by(rows.c.kind, rows.c.state)


def not_due_counts(models: Models, runner: Runner) -> list[tuple[str, str, int]]:
    """``(kind, state, count)`` of the pending jobs not due yet, in ``runner``'s transaction (snapshot)."""
    return [(r[0], r[1], int(r[2])) for r in runner.execute(not_due_statement(models))]
