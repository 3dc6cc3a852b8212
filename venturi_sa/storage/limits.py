"""Limit overrides (``<prefix>_limits``) and their history, the effective limits, and their use.

Every verb runs in the caller's transaction and never commits.  An override
holds from every worker's next claim after its commit: the claim reads the
overrides of its kinds in its own transaction (:func:`effective_limits`).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from venturi_sa.declarations.limit_rules import KindLimits, Rate
from venturi_sa.models import Models
from venturi_sa.states import Status
from venturi_sa.storage import drivers
from venturi_sa.storage.params import Runner

LimitValue = int | Rate | None
"""An override's value: a count (concurrency), a :class:`Rate`, or None (no limit)."""
RATES = ("rate_limit", "key_rate_limit")


def _decode(name: str, value: int | None, per: timedelta | None) -> LimitValue:
    if value is None:
        return None
    return Rate(value, per) if name in RATES and per is not None else value


def overrides(models: Models, runner: Runner, kinds: Sequence[str] | None = None) -> dict[str, dict[str, LimitValue]]:
    """``kind -> {name: value}`` of the overrides of ``kinds`` (every kind if None)."""
    table: Any = models.Limits.Override
    stmt = sa.select(table.kind, table.name, table.value, table.per)
    if kinds is not None:
        stmt = stmt.where(table.kind == sa.any_(sa.literal(list(kinds), postgresql.ARRAY(sa.Text))))
    found: dict[str, dict[str, LimitValue]] = {}
    for kind, name, value, per in runner.execute(stmt):
        found.setdefault(kind, {})[name] = _decode(name, value, per)
    return found


def apply(declared: KindLimits | None, overridden: Mapping[str, LimitValue] | None) -> KindLimits:
    """The limits in force: each override replaces the declared value of its name."""
    limits = declared or KindLimits()
    changes: dict[str, Any] = dict(overridden or {})
    return replace(limits, **changes) if changes else limits


OVERRIDES_TTL = 1.0
"""Seconds a worker keeps its list of overridden kinds.  Until it reads the list again, the plain claim
statement leaves out a kind overridden meanwhile (``storage/pauses.claimable_kinds``): a new limit holds
from the next claim, and the kind is claimed under it within this long."""
_OVERRIDDEN: dict[str, tuple[float, frozenset[str]]] = {}


def overridden_kinds(models: Models, runner: Runner) -> frozenset[str]:
    """The kinds with a runtime override row, read at most once per :data:`OVERRIDES_TTL` per prefix.

    ``set_overrides`` and ``clear_overrides`` forget this process's copy, so a
    change made here is seen by this process's next claim.
    """
    now = time.monotonic()
    cached = _OVERRIDDEN.get(models.prefix)
    if cached is not None and now - cached[0] < OVERRIDES_TTL:
        return cached[1]
    override: Any = models.Limits.Override
    kinds = frozenset(runner.execute(sa.select(override.kind).distinct()).scalars())
    _OVERRIDDEN[models.prefix] = (now, kinds)
    return kinds


def effective_limits(models: Models, runner: Runner, kinds: Sequence[str],
                     declared: Mapping[str, KindLimits]) -> dict[str, KindLimits]:
    """The kinds among ``kinds`` that take the limited claim, with their limits in force (one statement)."""
    found = overrides(models, runner, kinds)
    limits = {kind: apply(declared.get(kind), found.get(kind)) for kind in kinds
              if kind in declared or kind in found}
    return {kind: value for kind, value in limits.items() if value.any}


def set_overrides(models: Models, runner: Runner, kind: str, values: Mapping[str, LimitValue], actor: str) -> None:
    """Upsert one override per name in ``values`` and record each in the history; wakes the workers on commit."""
    table: Any = models.Limits.Override
    history: Any = models.Limits.History
    for name, value in values.items():
        count = value.limit if isinstance(value, Rate) else value
        per = value.per if isinstance(value, Rate) else None
        row = {"kind": kind, "name": name, "value": count, "per": per, "actor": actor}
        stmt = postgresql.insert(table).values(**row, set_at=sa.func.now())
        runner.execute(stmt.on_conflict_do_update(
            index_elements=["kind", "name"],
            set_={"value": stmt.excluded.value, "per": stmt.excluded.per, "actor": stmt.excluded.actor,
                  "set_at": stmt.excluded.set_at}))
        runner.execute(sa.insert(history).values(**row, action="set", at=sa.func.now()))
    runner.execute(drivers.notify_statement(models.names.channel))
    _OVERRIDDEN.pop(models.prefix, None)


def clear_overrides(models: Models, runner: Runner, kind: str, names: Sequence[str], actor: str) -> list[str]:
    """Delete the named overrides of ``kind`` (recording each in the history); the names that were set."""
    table: Any = models.Limits.Override
    history: Any = models.Limits.History
    gone = [row[0] for row in runner.execute(
        sa.delete(table).where(table.kind == kind, table.name.in_(list(names))).returning(table.name)
        .execution_options(synchronize_session=False))]
    for name in gone:
        runner.execute(sa.insert(history).values(kind=kind, name=name, action="clear", actor=actor,
                                                 at=sa.func.now()))
    if gone:
        runner.execute(drivers.notify_statement(models.names.channel))
    _OVERRIDDEN.pop(models.prefix, None)
    return sorted(gone)


def history(models: Models, runner: Runner, limit: int = 100) -> list[sa.Row[Any]]:
    """The override history, newest first."""
    table: Any = models.Limits.History
    return [*runner.execute(sa.select(table.kind, table.name, table.action, table.value, table.per, table.actor,
                                      table.at).order_by(table.id.desc()).limit(limit))]


def claimed_counts(models: Models, runner: Runner, kinds: Sequence[str]) -> dict[str, int]:
    """Claimed rows per kind: the use of a global concurrency limit."""
    job = models.Job
    rows = runner.execute(sa.select(job.kind, sa.func.count()).where(
        job.status == Status.CLAIMED.value, job.kind.in_(list(kinds))).group_by(job.kind))
    return {kind: int(n) for kind, n in rows}


def busiest_key(models: Models, runner: Runner, kind: str) -> tuple[str | None, int]:
    """The key of ``kind`` with the most claimed rows, and that count (``(None, 0)`` if none)."""
    job, key = models.Job, models.Limits.Key
    row = runner.execute(
        sa.select(key.key, sa.func.count().label("n")).select_from(job).join(key, key.job_id == job.id)
        .where(job.status == Status.CLAIMED.value, job.kind == kind).group_by(key.key)
        .order_by(sa.text("n DESC")).limit(1)).first()
    return (row[0], int(row[1])) if row is not None else (None, 0)


def key_claimed(models: Models, runner: Runner, kind: str, key: str) -> int:
    """Claimed rows of ``kind`` with ``key``."""
    job, table = models.Job, models.Limits.Key
    return int(runner.execute(
        sa.select(sa.func.count()).select_from(job).join(table, table.job_id == job.id)
        .where(job.status == Status.CLAIMED.value, job.kind == kind, table.key == key)).scalar_one())


def starts_within(models: Models, runner: Runner, kind: str, per: timedelta, bucket: str | None = None) -> int:
    """Starts of ``kind`` (of one key's ``bucket`` if given) in the last ``per`` on the database clock."""
    start: Any = models.Limits.Start
    stmt = sa.select(sa.func.count()).where(
        start.kind == kind, start.at > sa.func.statement_timestamp() - sa.literal(per, sa.Interval))
    if bucket is not None:
        stmt = stmt.where(start.key == bucket)
    return int(runner.execute(stmt).scalar_one())


def held_by_key(models: Models, runner: Runner, kind: str, key_concurrency: int) -> int:
    """Eligible pending jobs of ``kind`` whose key has ``key_concurrency`` or more claimed jobs."""
    job, key = models.Job, models.Limits.Key
    other, other_key = sa.orm.aliased(job), sa.orm.aliased(key)
    full = (sa.select(other_key.key).select_from(other).join(other_key, other_key.job_id == other.id)
            .where(other.status == Status.CLAIMED.value, other.kind == kind).group_by(other_key.key)
            .having(sa.func.count() >= key_concurrency))
    return int(runner.execute(
        sa.select(sa.func.count()).select_from(job).join(key, key.job_id == job.id)
        .where(job.status == Status.PENDING.value, job.kind == kind, job.visible_at <= sa.func.now(),
               key.key.in_(full))).scalar_one())


def eligible_count(models: Models, runner: Runner, kind: str) -> int:
    """Eligible pending jobs of ``kind``."""
    job = models.Job
    return int(runner.execute(sa.select(sa.func.count()).where(
        job.status == Status.PENDING.value, job.kind == kind, job.visible_at <= sa.func.now())).scalar_one())
