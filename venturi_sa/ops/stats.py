"""Queue statistics on demand: counts by status and kind, read in one snapshot.

:func:`stats` opens one short REPEATABLE READ transaction, so every count
(and ``as_of``, the database clock at its start) describes the same moment
even while workers commit.  It only reads and takes no locks; a crash or an
error leaves nothing behind.
"""

from __future__ import annotations

import dataclasses

import sqlalchemy as sa

from venturi_sa.models import Models
from venturi_sa.ops import limit_reasons
from venturi_sa.ops.records import KIND_KEYS, Stats, schedule_info
from venturi_sa.ops.transaction import short_transaction
from venturi_sa.states import STATUSES, Status
from venturi_sa.storage import archive_reads
from venturi_sa.storage import pauses as pauses_store
from venturi_sa.storage import schedules as schedules_store
from venturi_sa.storage import stats as stats_store
from venturi_sa.storage.pauses import PATTERN_MARK
from venturi_sa.storage.stats import StatsParams, StatsRows
from venturi_sa.task import Registry


def stats(models: Models, engine: sa.Engine, registry: Registry | None = None) -> Stats:
    """Counts by status and kind, pending split by why it waits, in flight, expired leases, oldest wait, schedules.

    Every pending job is in exactly one of ``eligible``, ``scheduled``,
    ``backoff``, ``sleeping``, ``waiting_for_signal`` and ``waiting`` (on
    parents), so a kind's columns sum to its ``total``.
    """
    with short_transaction(models, engine, "REPEATABLE READ") as session:
        raw = stats_store.read_stats(models, session, StatsParams())
        raw = dataclasses.replace(raw, counts=[*raw.counts, *archive_reads.counts(models, session)])  # same snapshot
        schedules = [schedule_info(r) for r in schedules_store.all_schedules(models, session) if r.removed_at is None]
        not_due = stats_store.not_due_counts(models, session)
        limited = limit_reasons.held_counts(models, session, registry)
        paused = [p.kind for p in pauses_store.pauses(models, session, in_force_only=True)]
    shaped = with_not_due(shape_stats(raw), not_due)
    return dataclasses.replace(shaped, schedules=schedules, limited=limited,
                               paused_kinds=[k for k in shaped.by_kind if paused_by(k, paused)])


def paused_by(kind: str, pauses: list[str]) -> bool:
    """Whether a pause in force of one of ``pauses`` (kinds, or patterns ending in ``*``) holds ``kind``."""
    return any(p == kind or (p.endswith(PATTERN_MARK) and kind.startswith(p[:-1])) for p in pauses)


def with_not_due(stats: Stats, not_due: list[tuple[str, str, int]]) -> Stats:
    """``stats`` with its pending jobs not due yet split by why they wait (``NOT_DUE_STATES``), per kind and
    in total (``scheduled`` keeps only the plainly scheduled ones)."""
    by_kind = {kind: {**counts, "scheduled": 0} for kind, counts in stats.by_kind.items()}
    for kind, state, n in not_due:
        by_kind.setdefault(kind, dict.fromkeys(KIND_KEYS, 0))[state] += n
    def total(state: str) -> int:
        return sum(k[state] for k in by_kind.values())

    return dataclasses.replace(stats, by_kind=by_kind, scheduled=total("scheduled"), backoff=total("backoff"),
                               sleeping=total("sleeping"), waiting_for_signal=total("waiting_for_signal"),
                               waiting=total("waiting"))


def _by_kind(raw: StatsRows) -> dict[str, dict[str, int]]:
    """``kind -> {KIND_KEYS...}``: every kind that has any row, with zeros filled in."""
    by_kind: dict[str, dict[str, int]] = {}

    def row(kind: str) -> dict[str, int]:
        return by_kind.setdefault(kind, dict.fromkeys(KIND_KEYS, 0))

    for status, kind, n in raw.counts:
        row(kind)[status] += n
        row(kind)["total"] += n
    for p in raw.pending:
        row(p.kind).update(eligible=p.eligible, scheduled=p.scheduled)
    for kind, n in raw.expired:
        row(kind)["expired_leases"] = n
    return dict(sorted(by_kind.items()))


def shape_stats(raw: StatsRows) -> Stats:
    """The :class:`Stats` record for raw aggregates (totals are sums over kinds)."""
    by_kind = _by_kind(raw)
    ages = {p.kind: p.oldest_eligible_age for p in raw.pending if p.oldest_eligible_age is not None}
    by_status = {s: sum(k[s] for k in by_kind.values()) for s in STATUSES}

    def total(key: str) -> int:
        return sum(k[key] for k in by_kind.values())

    return Stats(
        as_of=raw.as_of, total=total("total"), by_status=by_status, by_kind=by_kind,
        pending=by_status[Status.PENDING.value], eligible=total("eligible"), scheduled=total("scheduled"),
        in_flight=by_status[Status.CLAIMED.value], expired_leases=total("expired_leases"),
        completed=by_status[Status.COMPLETED.value], dead=by_status[Status.DEAD.value],
        oldest_eligible_age=max(ages.values()) if ages else None, oldest_eligible_age_by_kind=ages)
