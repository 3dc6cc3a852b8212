"""The plain data the operations return: job and journal snapshots, history pages, stats.

Every record is a frozen dataclass built from rows already read, so it is
safe to keep, share between threads and serialize after the transaction that
read it has ended; nothing here touches the database.  ``as_dict()`` gives a
JSON-friendly form (times as ISO 8601 strings, durations in seconds).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from datetime import datetime, timedelta
from typing import Any


def jsonable(value: Any) -> Any:
    """``value`` with datetimes as ISO 8601 strings and timedeltas as seconds (dicts recursively)."""
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items()}
    return value


@dataclass(frozen=True)
class FireInfo:
    """The schedule fire that inserted a job: schedule name, fire time, and when it fired (database clock).

    Read from the job's ``<prefix>_fires`` row, written in the transaction
    that inserted the job (so a fired job always has it, and no other job
    does).  ``fire_at`` is the fire time the schedule's timing produced, or
    the database clock of ``run_now`` / ``venturi schedules run``.
    """

    schedule: str
    fire_at: datetime
    fired_at: datetime


@dataclass(frozen=True)
class JobInfo:
    """A snapshot of one ``<prefix>_jobs`` row, as listings and admin actions return it.

    ``get_job`` returns a :class:`JobView`: this plus ``fired_by`` and ``timeout``.
    """

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
        """JSON-friendly: times as ISO 8601 strings (a :class:`JobView`'s ``timeout`` in seconds, its
        ``fired_by`` a mapping or None)."""
        return {k: jsonable(v) for k, v in asdict(self).items()}


@dataclass(frozen=True)
class JobView(JobInfo):
    """One job as ``get_job`` / ``get_job_async`` read it: a :class:`JobInfo` plus ``fired_by`` and ``timeout``.

    The row and both fields are read by one statement, so they agree; like
    every record it is a snapshot that may be stale once read.  ``fired_by``
    is the schedule fire that inserted the job, None if no schedule did.
    ``timeout`` is the job's own time limit (an enqueue's ``timeout=``, from
    ``<prefix>_timeouts``), None if it has none (its task's ``Task.timeout``
    applies).  Both are always read: None means none, never "not read".
    ``venturi jobs show`` prints them.
    """

    fired_by: FireInfo | None
    timeout: timedelta | None

    @property
    def info(self) -> JobInfo:
        """The plain :class:`JobInfo` of the same row: what a listing or an admin action returns for it.

        A ``JobView`` never equals a ``JobInfo`` (they are different records); compare ``view.info``.
        """
        return JobInfo(**{f.name: getattr(self, f.name) for f in fields(JobInfo)})


def job_view_info(row: Any) -> JobView:
    """One row of ``storage.history.fetch_job_view``: the job, the fire that inserted it (if any), its limit."""
    data = dict(row._mapping)
    schedule, fire_at, fired_at = data.pop("fire_schedule"), data.pop("fire_at"), data.pop("fired_at")
    fired = FireInfo(schedule=schedule, fire_at=fire_at, fired_at=fired_at) if schedule is not None else None
    return JobView(**data, fired_by=fired)


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
        """JSON-friendly: ``recorded_at`` as an ISO 8601 string."""
        return {k: jsonable(v) for k, v in asdict(self).items()}


@dataclass(frozen=True)
class Page:
    """One page of history; pass ``next_cursor`` back to get the next (None: last page)."""

    items: list[JobInfo]
    next_cursor: str | None

    def as_dict(self) -> dict[str, Any]:
        """JSON-friendly: the items' ``as_dict()`` and the cursor."""
        return {"items": [j.as_dict() for j in self.items], "next_cursor": self.next_cursor}


KIND_KEYS = ("total", "pending", "eligible", "scheduled", "backoff", "sleeping", "waiting_for_signal", "waiting",
             "claimed", "expired_leases", "completed", "dead")
"""The keys of every ``Stats.by_kind[kind]`` mapping; ``pending`` is the sum of ``eligible`` to ``waiting``."""


@dataclass(frozen=True)
class ScheduleInfo:
    """One stored schedule: its definition, next and last fire time, last job's status, state."""

    name: str
    kind: str
    timing: str
    tz: str
    catch_up: str
    overlap: str
    next_at: datetime
    last_at: datetime | None
    last_job: str | None
    last_status: str | None
    paused: bool
    removed: bool
    fired: int
    skipped: int

    def as_dict(self) -> dict[str, Any]:
        return {k: jsonable(v) for k, v in asdict(self).items()}


def schedule_info(row: Any) -> ScheduleInfo:
    """The record of one row of ``storage.schedules.all_schedules``."""
    return ScheduleInfo(name=row.name, kind=row.kind, timing=row.timing, tz=row.tz, catch_up=row.catch_up,
                        overlap=row.overlap, next_at=row.next_at, last_at=row.last_at, last_job=row.last_job,
                        last_status=row.last_status, paused=row.paused, removed=row.removed_at is not None,
                        fired=row.fired, skipped=row.skipped)


@dataclass(frozen=True)
class Stats:
    """Queue counts read in one snapshot at ``as_of`` (the database clock), and the live schedules.

    ``eligible`` pending jobs have ``visible_at <= as_of``; the others are
    each in one of ``waiting_for_signal`` (an open ``ctx.wait_for``),
    ``sleeping`` (``ctx.sleep``), ``waiting`` (on parents), ``backoff`` (a
    failure counted) and ``scheduled`` (due later), so ``eligible`` to
    ``waiting`` sum to ``pending``, and with ``in_flight``, ``completed`` and
    ``dead`` to ``total``.  ``in_flight`` is the ``claimed`` count, of which
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
    schedules: list[ScheduleInfo] = field(default_factory=list)
    """The queue's periodic-job schedules (removed ones left out), read in the same snapshot."""
    waiting: int = 0
    """Pending jobs waiting for unfinished parents (``after=``): neither eligible nor scheduled."""
    sleeping: int = 0
    """Pending jobs in a durable sleep (``ctx.sleep``) until their wake time."""
    waiting_for_signal: int = 0
    """Pending jobs waiting for a signal (``ctx.wait_for``) until it comes or their deadline."""
    limited: dict[str, int] = field(default_factory=dict)
    """Per kind, eligible pending jobs held by a limit now (docs/limits.md); counted in ``eligible`` too."""
    backoff: int = 0
    """Pending jobs due later after a failure (``failure_count > 0``), no step holding them."""
    paused_kinds: list[str] = field(default_factory=list)
    """The kinds of ``by_kind`` a pause in force holds (by name, by a pattern, or the whole queue's)."""

    def as_dict(self) -> dict[str, Any]:
        """JSON-friendly: ``as_of`` in ISO 8601, ages in seconds."""
        data = {k: jsonable(v) for k, v in asdict(self).items()}
        data["oldest_eligible_age_seconds"] = data.pop("oldest_eligible_age")
        data["oldest_eligible_age_seconds_by_kind"] = data.pop("oldest_eligible_age_by_kind")
        data["schedules"] = [s.as_dict() for s in self.schedules]
        return data
