"""Periodic-job SQL: the ``<prefix>_schedules`` and ``<prefix>_fires`` tables (migration v4).

Firing one schedule is one transaction of the caller's: :func:`lock_due`
locks one due schedule (``FOR UPDATE SKIP LOCKED``, due on the database
clock), the caller inserts the fired jobs (the enqueue verb
``insert_jobs``), :func:`record_fires` writes one row per fired (schedule,
fire time) under a primary key that refuses a second one, and
:func:`advance` moves the next fire time by compare-and-set on the value it
was locked with.  Commit publishes all of it; rollback or a crash before
commit leaves none of it, and the schedule due for the next worker.  None of
these functions commits.  The claim statement does not read these tables.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from venturi_sa.models import Models
from venturi_sa.states import Status
from venturi_sa.storage.params import Runner

ACTIVE = (Status.PENDING.value, Status.CLAIMED.value)
_NOW = sa.func.statement_timestamp


def _select(*columns: Any) -> sa.Select[Any]:
    return sa.select(*columns)


@dataclass(frozen=True, kw_only=True)
class LockDueParams:
    """Lock one live schedule due now, not among ``exclude`` (or the named one, due or not, with ``name``)."""

    name: str | None = None
    exclude: Sequence[str] = ()


@dataclass(frozen=True, kw_only=True)
class DueSchedule:
    """A locked schedule row and the database clock of the statement that locked it."""

    row: sa.Row[Any]
    now: datetime


@dataclass(frozen=True, kw_only=True)
class JobActiveParams:
    job_id: str | None


@dataclass(frozen=True, kw_only=True)
class FireRecord:
    fire_at: datetime
    job_id: str


@dataclass(frozen=True, kw_only=True)
class RecordFiresParams:
    schedule: str
    fires: Sequence[FireRecord]


@dataclass(frozen=True, kw_only=True)
class AdvanceParams:
    """Compare-and-set: only if ``next_at`` still equals ``due`` (None: leave next_at as it is)."""

    name: str
    due: datetime | None
    next_at: datetime | None
    last_at: datetime | None
    last_job: str | None
    fired: int
    skipped: int


@dataclass(frozen=True, kw_only=True)
class ReconcileParams:
    """Rows to insert (full rows), definitions to update (name -> columns), names to mark removed."""

    insert: Sequence[Mapping[str, Any]]
    update: Mapping[str, Mapping[str, Any]]
    remove: Sequence[str]


@dataclass(frozen=True, kw_only=True)
class PauseParams:
    name: str
    paused: bool
    next_at: datetime | None = None  # set on resume


@dataclass(frozen=True, kw_only=True)
class FireOfParams:
    job_id: str


def lock_due(models: Models, runner: Runner, params: LockDueParams) -> DueSchedule | None:
    """The soonest due live schedule, row-locked, skipping rows another worker holds; or None."""
    table = models.schedules_table
    stmt = _select(table, _NOW().label("db_now"))
    if params.name is None:
        if params.exclude:
            stmt = stmt.where(table.c.name.not_in(list(params.exclude)))
        stmt = (stmt.where(table.c.next_at <= _NOW(), sa.not_(table.c.paused), table.c.removed_at.is_(None))
                .order_by(table.c.next_at).limit(1).with_for_update(skip_locked=True, of=table))
    else:
        stmt = stmt.where(table.c.name == params.name).with_for_update(of=table)
    row = runner.execute(stmt).first()
    return DueSchedule(row=row, now=row.db_now) if row is not None else None


def job_active(models: Models, runner: Runner, params: JobActiveParams) -> bool:
    """Whether the job ``params.job_id`` exists and is pending or claimed."""
    if params.job_id is None:
        return False
    jobs = models.jobs_table
    status = runner.execute(_select(jobs.c.status).where(jobs.c.id == params.job_id)).scalar()
    return status in ACTIVE


def record_fires(models: Models, runner: Runner, params: RecordFiresParams) -> set[datetime]:
    """One ``_fires`` row per fire time not fired before; returns the fire times recorded now.

    A fire time that already has its row (the primary key ``(schedule,
    fire_at)``) is left as it is and not returned: its job must not be inserted.
    """
    if not params.fires:
        return set()
    fires = models.fires_table
    rows = [{"schedule": params.schedule, "fire_at": f.fire_at, "job_id": f.job_id, "fired_at": _NOW()}
            for f in params.fires]
    stmt = (postgresql.insert(fires).values(rows)
            .on_conflict_do_nothing(index_elements=[fires.c.schedule, fires.c.fire_at]).returning(fires.c.fire_at))
    return set(runner.execute(stmt).scalars())


def advance(models: Models, runner: Runner, params: AdvanceParams) -> bool:
    """Move the schedule on and count its fires and skips; False if ``next_at`` no longer equals ``due``."""
    table = models.schedules_table
    values: dict[str, Any] = {"fired": table.c.fired + params.fired, "skipped": table.c.skipped + params.skipped,
                              "updated": _NOW()}
    if params.next_at is not None:
        values["next_at"] = params.next_at
    if params.last_job is not None:
        values.update(last_at=params.last_at, last_job=params.last_job)
    stmt = sa.update(table).where(table.c.name == params.name).values(**values).returning(table.c.name)
    if params.due is not None:
        stmt = stmt.where(table.c.next_at == params.due)
    return runner.execute(stmt).first() is not None


def reconcile_lock(models: Models, runner: Runner) -> datetime:
    """Serialize reconciliations of this queue (a transaction-scoped advisory lock); the database clock."""
    digest = hashlib.blake2b(f"venturi-schedules:{models.prefix}".encode(), digest_size=8).digest()
    key = int.from_bytes(digest, "big", signed=True)
    runner.execute(_select(sa.func.pg_advisory_xact_lock(sa.literal(key, sa.BigInteger))))
    now: datetime = runner.execute(_select(_NOW())).scalar_one()
    return now


def all_schedules(models: Models, runner: Runner) -> Sequence[sa.Row[Any]]:
    """Every schedule row, with its last job's status (None if it has none or it was deleted), by name."""
    table, jobs = models.schedules_table, models.jobs_table
    stmt = (_select(table, jobs.c.status.label("last_status"))
            .select_from(table.outerjoin(jobs, jobs.c.id == table.c.last_job))
            .order_by(table.c.name))
    return runner.execute(stmt).all()


def apply_reconcile(models: Models, runner: Runner, params: ReconcileParams) -> None:
    """Insert new schedules, update changed ones (reviving removed ones), mark the rest removed."""
    table = models.schedules_table
    if params.insert:
        runner.execute(sa.insert(table).values(updated=_NOW()), [dict(row) for row in params.insert])
    for name, columns in params.update.items():
        runner.execute(sa.update(table).where(table.c.name == name).values(**columns, updated=_NOW()))
    if params.remove:
        runner.execute(sa.update(table).where(table.c.name.in_(params.remove), table.c.removed_at.is_(None))
                       .values(removed_at=_NOW(), updated=_NOW()))


def set_paused(models: Models, runner: Runner, params: PauseParams) -> bool:
    """Pause or resume a live schedule; False if there is no such live schedule."""
    table = models.schedules_table
    values: dict[str, Any] = {"paused": params.paused, "updated": _NOW()}
    if params.next_at is not None:
        values["next_at"] = params.next_at
    stmt = (sa.update(table).where(table.c.name == params.name, table.c.removed_at.is_(None))
            .values(**values).returning(table.c.name))
    return runner.execute(stmt).first() is not None


def seconds_until_due(models: Models, runner: Runner) -> float | None:
    """Seconds (database clock) until the soonest live schedule is due; <= 0 if one is due; None if none."""
    table = models.schedules_table
    value = runner.execute(
        _select(sa.func.extract("epoch", sa.func.min(table.c.next_at) - _NOW()))
        .where(sa.not_(table.c.paused), table.c.removed_at.is_(None))).scalar()
    return float(value) if value is not None else None


def fire_of(models: Models, runner: Runner, params: FireOfParams) -> sa.Row[Any] | None:
    """``(schedule, fire_at, fired_at)`` of the fire that inserted job ``params.job_id``, or None."""
    fires = models.fires_table
    return runner.execute(_select(fires.c.schedule, fires.c.fire_at, fires.c.fired_at)
                          .where(fires.c.job_id == params.job_id)).first()


__all__ = ["AdvanceParams", "DueSchedule", "FireOfParams", "FireRecord", "JobActiveParams", "LockDueParams",
           "PauseParams", "ReconcileParams", "RecordFiresParams", "advance", "all_schedules", "apply_reconcile",
           "fire_of", "job_active", "lock_due", "reconcile_lock", "record_fires", "seconds_until_due",
           "set_paused"]
