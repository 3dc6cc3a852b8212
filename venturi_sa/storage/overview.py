"""The dashboard overview's read SQL: counts by kind, journal activity and latency over a window.

Every statement is a plain ``SELECT`` without locks, served by a seed index;
builders are public so ``tests/web`` can ``EXPLAIN`` exactly what the
overview runs.  Nothing here commits.

- **Counts**: live rows (pending, claimed, dead up to a cap) exactly, and the
  jobs finished in the window through the partial ``_jobs_finished (finished_at)``.
- **Activity** (throughput per bucket) reads the journal, which has no time
  index: its identity key is in insertion order, so a binary search over the
  primary key (one recursive statement, ~log2(rows) index probes) finds the first
  entry of the window, and the window is then a primary-key range scan.
- **Latency** (enqueue to finish) reads the jobs finished in the window through
  the partial ``_jobs_finished (finished_at)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa

from venturi_sa.models import Models
from venturi_sa.states import Outcome, Status
from venturi_sa.storage.params import Runner
from venturi_sa.storage.stats import PendingRow, expired_statement, pending_statement


def _select(*columns: Any) -> sa.Select[Any]:
    """``select()`` typed loosely, the same under SQLAlchemy 2.0 and 2.1."""
    return sa.select(*columns)


# -- the overview's counts: live rows exactly, history only within the window --------------

def claimed_counts_statement(models: Models) -> sa.Select[Any]:
    """``(kind, count)`` of claimed jobs (live rows only)."""
    job = models.Job
    return (_select(job.kind, sa.func.count()).where(job.status == Status.CLAIMED.value,
                                                     job.claim_expires_at.is_not(None))
            .group_by(job.kind))


DEAD_COUNT_CAP = 1000
"""The overview counts a kind's dead jobs up to this many (shown as "1000+" beyond)."""


def dead_counts_statement(models: Models, cap: int = DEAD_COUNT_CAP) -> sa.Select[Any]:
    """``(kind, count)`` of dead jobs per kind, each count stopping at ``cap``.

    The kinds with dead jobs come from a skip scan of ``_jobs_history (status,
    kind, ...)`` (one index probe per kind: a recursive step to the next greater
    kind), and each kind's count reads at most ``cap`` entries of the same
    index, so the cost is bounded by kinds x ``cap`` however many dead rows
    the history keeps.
    """
    job = models.jobs_table
    dead = job.c.status == Status.DEAD.value
    kinds = _select(job.c.kind).where(dead).order_by(job.c.kind).limit(1).cte("dead_kinds", recursive=True)
    following = (_select(job.c.kind).where(dead, job.c.kind > kinds.c.kind).order_by(job.c.kind).limit(1)
                 .scalar_subquery())
    kinds = kinds.union_all(_select(following).where(kinds.c.kind.is_not(None)))
    some = (_select(sa.literal(1).label("one")).where(dead, job.c.kind == kinds.c.kind).limit(cap)
            .correlate(kinds).subquery("some"))
    counted = _select(sa.func.count()).select_from(some).scalar_subquery()
    return _select(kinds.c.kind, counted).where(kinds.c.kind.is_not(None))


def finished_counts_statement(models: Models, params: WindowParams) -> sa.Select[Any]:
    """``(kind, status, count)`` of jobs finished in the window, through ``_jobs_finished``."""
    job = models.Job
    return (_select(job.kind, job.status, sa.func.count())
            .where(job.finished_at >= params.since(), job.finished_at.is_not(None))
            .group_by(job.kind, job.status))


@dataclass(frozen=True, kw_only=True)
class OverviewCounts:
    """The overview's counts at ``as_of``: never a count over every retained ``completed`` row."""

    as_of: datetime
    pending: Sequence[PendingRow]
    expired: Sequence[tuple[str, int]]
    claimed: Sequence[tuple[str, int]]
    dead: Sequence[tuple[str, int]]
    finished: Sequence[tuple[str, str, int]]


def fetch_overview_counts(models: Models, runner: Runner, params: WindowParams) -> OverviewCounts:
    """Six small statements; run them in one REPEATABLE READ transaction to share one snapshot."""
    as_of = runner.execute(_select(sa.func.now())).scalar_one()
    pending = [PendingRow(kind=r[0], eligible=int(r[1]), scheduled=int(r[2]), oldest_eligible_age=r[3])
               for r in runner.execute(pending_statement(models))]

    def pairs(stmt: sa.Select[Any]) -> list[tuple[str, int]]:
        return [(r[0], int(r[1])) for r in runner.execute(stmt)]

    return OverviewCounts(
        as_of=as_of, pending=pending, expired=pairs(expired_statement(models)),
        claimed=pairs(claimed_counts_statement(models)), dead=pairs(dead_counts_statement(models)),
        finished=[(r[0], r[1], int(r[2])) for r in runner.execute(finished_counts_statement(models, params))])


# -- the journal window -------------------------------------------------------------------

def journal_floor(models: Models, since: Any) -> sa.ScalarSelect[Any]:
    """The id of the first journal entry recorded at or after ``since`` (binary search on the key).

    Entries are numbered in insertion order, so ``recorded_at`` grows with ``id``
    (up to commit-order jitter of a few milliseconds).  Each step probes the
    primary key once; the search ends in about log2(rows) steps.
    """
    entry = models.journal_table
    bounds = _select(sa.func.min(entry.c.id).label("lo"), sa.func.max(entry.c.id).label("hi")).cte(
        "search", recursive=True)
    mid = (bounds.c.lo + bounds.c.hi) // 2
    probe = (_select(entry.c.id, entry.c.recorded_at).where(entry.c.id >= mid)
             .order_by(entry.c.id).limit(1).lateral("probe"))
    before = probe.c.recorded_at < since
    step = (
        _select(sa.case((before, probe.c.id + 1), else_=bounds.c.lo),
                sa.case((before, bounds.c.hi), else_=mid))
        .select_from(bounds.join(probe, sa.true()))
        .where(bounds.c.lo < bounds.c.hi)
    )
    search = bounds.union_all(step)
    return _select(sa.func.max(search.c.lo)).scalar_subquery()


def _bucket(column: Any, seconds: int) -> Any:
    """``column`` rounded down to a multiple of ``seconds`` since the epoch."""
    epoch = sa.extract("epoch", column)
    return sa.func.to_timestamp(sa.func.floor(epoch / seconds) * seconds)


@dataclass(frozen=True, kw_only=True)
class WindowParams:
    """The window ``[now() - span, now()]`` on the database clock, cut into buckets of ``bucket_seconds``."""

    span: timedelta
    bucket_seconds: int

    def since(self) -> Any:
        return sa.func.now() - sa.literal(self.span, sa.Interval)


def activity_statement(models: Models, params: WindowParams, floor: int | None = None) -> sa.Select[Any]:
    """``(bucket, outcome, count)`` of the journal entries in the window, a primary-key range from ``floor``.

    ``floor`` is the window's first entry id (:func:`journal_floor`, read by a
    statement of its own so the planner sees the real range: inlined, it
    guesses a third of the table and may plan a parallel scan for a few
    thousand rows); None inlines the search.
    """
    entry = models.journal_table
    bucket = _bucket(entry.c.recorded_at, params.bucket_seconds).label("bucket")
    lower = journal_floor(models, params.since()) if floor is None else sa.literal(floor, sa.BigInteger)
    return (
        _select(bucket, entry.c.outcome, sa.func.count())
        .where(entry.c.id >= lower, entry.c.recorded_at >= params.since())
        .group_by(bucket, entry.c.outcome)
        .order_by(bucket)
    )


def latency_statement(models: Models, params: WindowParams) -> sa.Select[Any]:
    """``(bucket, p50, p95, count)`` seconds from enqueue to ``completed``, for jobs finished in the window."""
    job = models.Job
    bucket = _bucket(job.finished_at, params.bucket_seconds).label("bucket")
    seconds = sa.extract("epoch", job.finished_at - job.created_at)
    return (
        _select(bucket, sa.func.percentile_cont(0.5).within_group(seconds),
                sa.func.percentile_cont(0.95).within_group(seconds), sa.func.count())
        .where(job.finished_at >= params.since(), job.finished_at.is_not(None),
               job.status == Status.COMPLETED.value)
        .group_by(bucket)
        .order_by(bucket)
    )


def fetch_activity(models: Models, runner: Runner, params: WindowParams) -> Sequence[sa.Row[Any]]:
    """The window's first journal id (about 20 key probes), then its buckets: two statements."""
    floor = runner.execute(_select(journal_floor(models, params.since()))).scalar()
    if floor is None:  # an empty journal
        return []
    return runner.execute(activity_statement(models, params, int(floor))).all()


def fetch_latency(models: Models, runner: Runner, params: WindowParams) -> Sequence[sa.Row[Any]]:
    return runner.execute(latency_statement(models, params)).all()


FAILED_OUTCOMES = (Outcome.RETRIED.value, Outcome.DEAD.value, Outcome.STALE_RECOVERED.value)
"""Journal outcomes the throughput chart counts as failures."""
