"""Looking at a queue and acting on it as an operator: jobs, journals, history, stats,
retention cleanup and admin actions.

Every function here takes an ``Engine`` and opens its own short transactions
(never the application's session); every time it reads or writes comes from
the database clock.  Results are plain frozen dataclasses, safe to keep after
the transaction ends.  The :class:`~venturi_sa.Queue` methods of the same
names are the public entry points.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session

from venturi_sa.errors import InvalidOption, InvalidTransition, JobNotFound, SchemaNotMigrated
from venturi_sa.models import Models
from venturi_sa.states import STATUSES, TERMINAL, Status
from venturi_sa.storage import admin as admin_sql
from venturi_sa.storage import cleanup as cleanup_sql
from venturi_sa.storage import history as history_sql
from venturi_sa.storage import stats as stats_sql

MAX_PAGE = 1000
_UNDEFINED_TABLE, _UNDEFINED_COLUMN = "42P01", "42703"


def _jsonable(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    return value


@dataclass(frozen=True)
class JobInfo:
    """A snapshot of one ``<prefix>_jobs`` row."""

    id: str
    kind: str
    payload: Any
    priority: int
    status: str
    created_at: datetime
    visible_at: datetime
    claim_expires_at: datetime | None
    claimed_by: str | None
    finished_at: datetime | None
    run_count: int
    failure_count: int
    carry: Any
    dedup_key: str | None

    def as_dict(self) -> dict[str, Any]:
        """JSON-friendly: times as ISO 8601 strings."""
        return {k: _jsonable(v) for k, v in asdict(self).items()}


@dataclass(frozen=True)
class JournalInfo:
    """One ``<prefix>_journal`` row: what one run (or admin action) recorded."""

    id: int
    job_id: str
    kind: str
    run_no: int
    recorded_at: datetime
    outcome: str
    note: str | None
    attachment: Any

    def as_dict(self) -> dict[str, Any]:
        return {k: _jsonable(v) for k, v in asdict(self).items()}


@dataclass(frozen=True)
class Page:
    """One page of history; pass ``next_cursor`` back to get the next (None: last page)."""

    items: list[JobInfo]
    next_cursor: str | None

    def as_dict(self) -> dict[str, Any]:
        return {"items": [j.as_dict() for j in self.items], "next_cursor": self.next_cursor}


@dataclass(frozen=True)
class Stats:
    """Queue counts read in one snapshot at ``as_of`` (the database clock).

    ``eligible`` pending jobs have ``visible_at <= as_of``; ``scheduled``
    ones are due later.  ``in_flight`` is the ``claimed`` count, of which
    ``expired_leases`` have ``claim_expires_at < as_of`` (awaiting recovery).
    ``by_kind[kind]`` has the keys of :data:`KIND_KEYS`.
    """

    as_of: datetime
    total: int
    by_status: dict[str, int]
    by_kind: dict[str, dict[str, int]]
    pending: int
    eligible: int
    scheduled: int
    in_flight: int
    expired_leases: int
    completed: int
    dead: int
    oldest_eligible_age: timedelta | None
    oldest_eligible_age_by_kind: dict[str, timedelta] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """JSON-friendly: ``as_of`` in ISO 8601, ages in seconds."""
        data = {k: _jsonable(v) for k, v in asdict(self).items()}
        data["oldest_eligible_age_seconds"] = data.pop("oldest_eligible_age")
        data["oldest_eligible_age_seconds_by_kind"] = data.pop("oldest_eligible_age_by_kind")
        return data


KIND_KEYS = ("total", "pending", "eligible", "scheduled", "claimed", "expired_leases",
             "completed", "dead")


@contextmanager
def _transaction(models: Models, engine: sa.Engine, isolation: str | None = None) -> Iterator[Session]:
    """A short Session transaction; commits on success, rolls back on any error.

    A missing table or column becomes :class:`SchemaNotMigrated`.
    """
    bind: sa.Engine = engine.execution_options(isolation_level=isolation) if isolation else engine
    try:
        with Session(bind) as session, session.begin():
            yield session
    except sa.exc.ProgrammingError as exc:
        code = getattr(exc.orig, "pgcode", None)
        if code in (_UNDEFINED_TABLE, _UNDEFINED_COLUMN):
            raise SchemaNotMigrated(
                f"queue {models.prefix!r} is not migrated (or is at an older version): "
                f"run `venturi migrate --prefix {models.prefix}` or "
                f"alembic_venturi.upgrade(engine, {models.prefix!r})") from exc
        raise


def _not_found(models: Models, job_id: str) -> JobNotFound:
    return JobNotFound(f"no job with id {job_id!r} in queue {models.prefix!r}")


# -- one job and its journal -------------------------------------------------------

def get_job(models: Models, engine: sa.Engine, job_id: str) -> JobInfo:
    """The job's current row; raises ``JobNotFound`` if there is none."""
    with _transaction(models, engine) as session:
        row = history_sql.fetch_job(models, session, job_id)
    if row is None:
        raise _not_found(models, job_id)
    return JobInfo(**row._mapping)


def journal(models: Models, engine: sa.Engine, job_id: str) -> list[JournalInfo]:
    """The job's journal, oldest entry first; ``JobNotFound`` if the job does not exist."""
    with _transaction(models, engine) as session:
        rows = history_sql.fetch_journal(models, session, job_id)
        if not rows and history_sql.fetch_job(models, session, job_id) is None:
            raise _not_found(models, job_id)
    return [JournalInfo(**r._mapping) for r in rows]


# -- history -----------------------------------------------------------------------

def encode_cursor(created_at: datetime, job_id: str) -> str:
    """An opaque cursor: urlsafe base64 of ``[created_at ISO 8601, id]``."""
    raw = json.dumps([created_at.isoformat(), job_id], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[datetime, str]:
    """Inverse of :func:`encode_cursor`; a malformed cursor raises ``InvalidOption``."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        created, job_id = json.loads(raw)
        when = datetime.fromisoformat(created)
    except (binascii.Error, ValueError, TypeError, UnicodeDecodeError) as exc:
        raise InvalidOption(f"invalid history cursor {cursor!r}: pass a next_cursor "
                            "exactly as a previous page returned it") from exc
    if when.tzinfo is None or not isinstance(job_id, str):
        raise InvalidOption(f"invalid history cursor {cursor!r}: pass a next_cursor "
                            "exactly as a previous page returned it")
    return when, job_id


def _statuses(status: str | Sequence[str] | None, allowed: Sequence[str], what: str) -> tuple[str, ...]:
    values = (status,) if isinstance(status, str) else tuple(status or ())
    bad = [s for s in values if s not in allowed]
    if bad:
        raise InvalidOption(f"invalid {what} status {bad[0]!r}: use one of {', '.join(allowed)}")
    return values


def _aware(name: str, value: datetime | None) -> datetime | None:
    if value is not None and (not isinstance(value, datetime) or value.tzinfo is None):
        raise InvalidOption(f"{name} must be a timezone-aware datetime, got {value!r}")
    return value


def history(models: Models, engine: sa.Engine, *, status: str | Sequence[str] | None = None,
            kind: str | None = None, finished_after: datetime | None = None,
            finished_before: datetime | None = None, limit: int = 50,
            cursor: str | None = None) -> Page:
    """Jobs newest first by ``(created_at, id)``, keyset-paged (never OFFSET).

    Pages are stable while jobs are added: a later page continues strictly
    after the previous page's last row, so nothing repeats or is skipped
    among jobs that existed at the first page (jobs enqueued since appear
    only on a new first page).  ``finished_after`` is inclusive,
    ``finished_before`` exclusive; an empty status sequence means any.
    """
    if not isinstance(limit, int) or not 1 <= limit <= MAX_PAGE:
        raise InvalidOption(f"history limit must be between 1 and {MAX_PAGE}, got {limit!r}")
    params = history_sql.HistoryParams(
        statuses=_statuses(status, STATUSES, "history"), kind=kind,
        finished_after=_aware("finished_after", finished_after),
        finished_before=_aware("finished_before", finished_before),
        limit=limit, after=decode_cursor(cursor) if cursor is not None else None)
    with _transaction(models, engine) as session:
        rows = history_sql.fetch_history(models, session, params)
    items = [JobInfo(**r._mapping) for r in rows[:limit]]
    more = len(rows) > limit
    return Page(items=items, next_cursor=encode_cursor(items[-1].created_at, items[-1].id) if more else None)


# -- stats -------------------------------------------------------------------------

def stats(models: Models, engine: sa.Engine) -> Stats:
    """Counts by status and kind, read in one REPEATABLE READ snapshot."""
    with _transaction(models, engine, "REPEATABLE READ") as session:
        raw = stats_sql.read_stats(models, session)
    return _shape_stats(raw)


def _shape_stats(raw: stats_sql.StatsRows) -> Stats:
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
    ages = {p.kind: p.oldest_eligible_age for p in raw.pending if p.oldest_eligible_age is not None}
    by_status = {s: sum(k[s] for k in by_kind.values()) for s in STATUSES}

    def total(key: str) -> int:
        return sum(k[key] for k in by_kind.values())

    return Stats(
        as_of=raw.as_of, total=total("total"), by_status=by_status, by_kind=dict(sorted(by_kind.items())),
        pending=by_status[Status.PENDING.value], eligible=total("eligible"), scheduled=total("scheduled"),
        in_flight=by_status[Status.CLAIMED.value], expired_leases=total("expired_leases"),
        completed=by_status[Status.COMPLETED.value], dead=by_status[Status.DEAD.value],
        oldest_eligible_age=max(ages.values()) if ages else None, oldest_eligible_age_by_kind=ages)


# -- retention cleanup ---------------------------------------------------------------

def cleanup(models: Models, engine: sa.Engine, *, before: datetime | None = None,
            older_than: timedelta | None = None, status: str | Sequence[str] | None = None,
            kind: str | None = None, batch_size: int = 1000, dry_run: bool = False,
            progress: Callable[[int], None] | None = None) -> int:
    """Delete ``completed``/``dead`` jobs finished before the cutoff; returns how many.

    Give exactly one of ``before`` (an aware datetime) or ``older_than``
    (subtracted from the database clock once, at the start).  Deletes in
    batches of ``batch_size``, each batch its own transaction, so no lock is
    held for long; a crash leaves earlier batches deleted and nothing half
    done.  Journal rows go with their jobs.  Rows locked by someone else
    are skipped (a later cleanup catches them).  ``progress(total_so_far)``
    is called after each batch that deleted rows.  ``dry_run`` only counts.
    """
    statuses = _statuses(status, TERMINAL, "cleanup (only terminal statuses may be deleted)")
    if (before is None) == (older_than is None):
        raise InvalidOption("cleanup needs exactly one of before= or older_than=")
    if older_than is not None and (not isinstance(older_than, timedelta) or older_than < timedelta(0)):
        raise InvalidOption(f"older_than must be a non-negative timedelta, got {older_than!r}")
    if not isinstance(batch_size, int) or batch_size < 1:
        raise InvalidOption(f"cleanup batch_size must be a positive integer, got {batch_size!r}")
    cutoff = _aware("before", before)
    if cutoff is None:
        with _transaction(models, engine) as session:
            cutoff = cleanup_sql.db_cutoff(session, older_than or timedelta(0))
    params = cleanup_sql.CleanupParams(cutoff=cutoff, statuses=statuses, kind=kind, batch_size=batch_size)
    if dry_run:
        with _transaction(models, engine) as session:
            return cleanup_sql.count_matching(models, session, params)
    return _delete_in_batches(models, engine, params, progress)


def _delete_in_batches(models: Models, engine: sa.Engine, params: cleanup_sql.CleanupParams,
                       progress: Callable[[int], None] | None) -> int:
    total = 0
    while True:
        with _transaction(models, engine) as session:
            deleted, newest = cleanup_sql.delete_batch(models, session, params)
        params = replace(params, floor=newest or params.floor)
        total += deleted
        if deleted and progress is not None:
            progress(total)
        if deleted < params.batch_size:
            return total


# -- admin actions ---------------------------------------------------------------------

_HINTS = {
    Status.PENDING.value: "kill stops a pending job",
    Status.CLAIMED.value: "release returns a claimed job whose worker is gone",
    Status.DEAD.value: "requeue runs a dead job again",
    Status.COMPLETED.value: "a completed job is final",
}


def _admin(models: Models, engine: sa.Engine, job_id: str, action: admin_sql.AdminAction,
           note: str | None) -> JobInfo:
    """Lock the row, check its status, apply the transition and journal it, in one transaction."""
    with _transaction(models, engine) as session:
        current = admin_sql.lock_job(models, session, job_id)
        if current is None:
            raise _not_found(models, job_id)
        if current.status != action.from_status.value:
            raise InvalidTransition(
                f"cannot {action.name} job {job_id}: it is {current.status}, and {action.name} "
                f"applies only to {action.from_status.value} jobs ({_HINTS[current.status]})")
        row = admin_sql.apply(models, session, admin_sql.AdminParams(job_id=job_id, action=action, note=note))
        if row is None:  # pragma: no cover - the row is locked and its status checked above
            raise InvalidTransition(f"cannot {action.name} job {job_id}: its status changed")
        return JobInfo(**row._mapping)


def requeue(models: Models, engine: sa.Engine, job_id: str, note: str | None = None) -> JobInfo:
    """``dead`` → ``pending``, visible now, ``failure_count`` reset to 0; journaled ``released``."""
    return _admin(models, engine, job_id, admin_sql.REQUEUE, note)


def kill(models: Models, engine: sa.Engine, job_id: str, note: str | None = None) -> JobInfo:
    """``pending`` → ``dead`` with ``finished_at`` set; journaled ``dead``."""
    return _admin(models, engine, job_id, admin_sql.KILL, note)


def release(models: Models, engine: sa.Engine, job_id: str, note: str | None = None) -> JobInfo:
    """``claimed`` → ``pending``, visible now, claim cleared, no failure counted; journaled ``released``."""
    return _admin(models, engine, job_id, admin_sql.RELEASE, note)
