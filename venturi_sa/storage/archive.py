"""The archive SQL: move terminal jobs out of ``<prefix>_jobs``, read them back, drop old days.

``<prefix>_archive`` (migration v9) is range-partitioned by ``moved_at``,
one partition per UTC day named ``<prefix>_archive_YYYYMMDD``.  What each
statement locks:

* :func:`ensure_partitions` creates a day's table with ``CREATE TABLE …
  (LIKE <prefix>_archive INCLUDING DEFAULTS INCLUDING CONSTRAINTS)`` (locks
  nothing anyone else uses) and attaches it with ``ALTER TABLE … ATTACH
  PARTITION``, which takes ``SHARE UPDATE EXCLUSIVE`` on the parent: readers
  and the archiver's inserts and deletes go on (``CREATE TABLE … PARTITION
  OF`` would take ``ACCESS EXCLUSIVE`` on the parent, which is why it is not
  used).  Attaching runs under a transaction-level advisory lock, so two
  workers never race to create the same day, and under ``lock_timeout``.
* :func:`move_batch` is one statement (data-modifying CTEs): lock up to
  ``batch_size`` terminal rows ``FOR UPDATE SKIP LOCKED``, delete them, and
  insert one archive row per job holding the job row, its journal rows, its
  time limit and its trace context.  The journal, time-limit, trace and
  cancel-request rows go from their tables by the ``ON DELETE CASCADE`` that
  fires at the end of the same statement; the statement's snapshot still
  reads them.  On commit whole jobs have moved; on rollback or a crash none
  has (one transaction), so a job is always in exactly one place.
* :func:`drop_partition` takes ``ACCESS EXCLUSIVE`` on the parent for the
  moment of the ``DROP TABLE`` (it blocks reads of the archive until its
  transaction commits), waiting at most ``lock_timeout`` for it.
* Reads are plain ``SELECT`` without locks.  Row deletes (:func:`delete_batch`)
  and the move back (:func:`restore`) lock the rows they delete.

Nothing here commits.  Table and partition names come from the validated
prefix and from dates computed here, never from user input.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta, timezone
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import JSONB

from venturi_sa.models import Models
from venturi_sa.storage.cleanup import CleanupParams
from venturi_sa.storage.history import HistoryParams, history_statement
from venturi_sa.storage.params import Runner

DAYS_AHEAD = 1
"""Partitions are attached for today and this many days ahead (UTC), so midnight never finds none."""
LOCK_TIMEOUT = "5s"
"""The longest an attach or a drop waits for its lock on the archive before giving up (retried later)."""
_DAY = re.compile(r"_([0-9]{8})$")
PARTITION_INDEXES = (("created", "created_at, id"), ("history", "status, kind, finished_at"),
                     ("finished", "finished_at"))
"""Each day's indexes, ``<prefix>_archive_YYYYMMDD_<suffix>`` (its primary key is ``…_pkey``)."""


@dataclass(frozen=True, kw_only=True)
class MoveParams:
    """Move up to ``batch_size`` terminal jobs that finished more than ``after`` ago (database clock)."""

    after: timedelta
    batch_size: int = 1000
    floor: datetime | None = None
    """The previous batch's newest ``finished_at``: the index scan starts there, past the entries it deleted."""


def lock_key(prefix: str) -> int:
    """The advisory-lock key that serializes attaching and dropping ``prefix``'s partitions."""
    digest = hashlib.blake2b(f"venturi-archive\0{prefix}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


def _bound(day: date) -> str:
    return datetime.combine(day, time(0), timezone.utc).isoformat()


def partitions(models: Models, runner: Runner) -> dict[date, str]:
    """The attached day partitions of the archive, by day (from ``pg_inherits``); other children are ignored."""
    rows = runner.execute(sa.text(
        "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
        "WHERE i.inhparent = to_regclass(:parent)"), {"parent": models.names.archive}).scalars()
    days: dict[date, str] = {}
    for name in rows:
        found = _DAY.search(name)
        day = datetime.strptime(found.group(1), "%Y%m%d").date() if found is not None else None
        if day is not None and name == models.names.archive_partition(day):
            days[day] = name
    return days


def _lock(models: Models, runner: Runner) -> None:
    runner.execute(sa.select(sa.func.set_config("lock_timeout", LOCK_TIMEOUT, True)))
    runner.execute(sa.select(sa.func.pg_advisory_xact_lock(lock_key(models.prefix))))


def today(runner: Runner) -> date:
    """The database clock's current UTC day."""
    value: date = runner.execute(sa.text("SELECT (now() AT TIME ZONE 'UTC')::date")).scalar_one()
    return value


def ensure_partitions(models: Models, runner: Runner, ahead: int = DAYS_AHEAD,
                      start: date | None = None) -> list[str]:
    """Attach the partitions of today (or ``start``) and ``ahead`` days after it that are missing; returns their names.

    Serialized by an advisory lock held until the caller's transaction ends;
    on rollback nothing is attached.  Each new partition gets the archive's
    storage parameters (an append-only table: vacuumed after 5 % new rows so
    its visibility map lets counts and history use index-only scans).
    """
    _lock(models, runner)
    have = partitions(models, runner)
    first = start if start is not None else today(runner)
    made = []
    for day in (first + timedelta(days=n) for n in range(ahead + 1)):
        if day in have:
            continue
        name, parent = models.names.archive_partition(day), models.names.archive
        runner.execute(sa.text(
            f"CREATE TABLE {name} (LIKE {parent} INCLUDING DEFAULTS INCLUDING CONSTRAINTS) "
            "WITH (autovacuum_vacuum_insert_scale_factor = 0.05)"))
        for suffix, columns in PARTITION_INDEXES:  # named like the parent's; ATTACH adopts them
            runner.execute(sa.text(f"CREATE INDEX {name}_{suffix} ON {name} ({columns})"))
        runner.execute(sa.text(
            f"ALTER TABLE {parent} ATTACH PARTITION {name} "
            f"FOR VALUES FROM ('{_bound(day)}') TO ('{_bound(day + timedelta(days=1))}')"))
        made.append(name)
    return made


_MOVE = """
WITH picked AS MATERIALIZED (
    SELECT j.id FROM {jobs} AS j
    WHERE j.status IN ('completed', 'dead') AND j.finished_at < now() - CAST(:after AS interval)
      AND j.finished_at >= CAST(:floor AS timestamptz)
      AND NOT EXISTS (SELECT 1 FROM {on_dead} AS o WHERE o.job_id = j.id)
    ORDER BY j.finished_at
    LIMIT :batch_size
    FOR UPDATE OF j SKIP LOCKED
), gone AS (
    DELETE FROM {jobs} AS j WHERE j.id = ANY(ARRAY(SELECT id FROM picked))
    RETURNING j.*
), moved AS (
    INSERT INTO {archive} (id, kind, status, created_at, finished_at, moved_at, job, journal, timeout, trace)
    SELECT g.id, g.kind, g.status, g.created_at, g.finished_at, now(), {job_json},
           coalesce((SELECT jsonb_agg({entry_json} ORDER BY e.id) FROM {journal} AS e WHERE e.job_id = g.id),
                    '[]'::jsonb),
           (SELECT t.timeout FROM {timeouts} AS t WHERE t.job_id = g.id),
           (SELECT r.carrier FROM {traces} AS r WHERE r.job_id = g.id)
    FROM gone AS g
    RETURNING finished_at
)
SELECT count(*), max(finished_at) FROM moved
"""


JOB_KEYS = ("id", "kind", "status", "created_at", "finished_at")
"""Job columns the archive holds as columns of its own, left out of its ``job`` JSON."""
ENTRY_KEYS = ("job_id", "kind")
"""Journal columns every entry of a job shares with the job, left out of the ``journal`` JSON."""


def _compact(table: sa.Table, alias: str, repeated: tuple[str, ...]) -> str:
    """``to_jsonb(alias)`` without the ``repeated`` keys, nor the keys whose value is NULL (JSON null for JSON).

    Only top-level keys go (a payload's own nulls stay); reading a missing
    key gives NULL, which decodes as the value left out did.
    """
    dropped = ", ".join(f"'{name}'" for name in repeated)
    empty = [f"CASE WHEN {alias}.{c.name} = 'null'::jsonb THEN '{c.name}' END" if _is_jsonb(c) else
             f"CASE WHEN {alias}.{c.name} IS NULL THEN '{c.name}' END"
             for c in table.c if c.name not in repeated and (c.nullable or _is_jsonb(c))]
    return f"to_jsonb({alias}) - ARRAY[{dropped}] - array_remove(ARRAY[{', '.join(empty)}], NULL)"


def move_statement(models: Models) -> sa.TextClause:
    """The move (see the module docstring); binds ``after`` (an interval) and ``batch_size``.

    Jobs with an owed ``on_dead`` call (``<prefix>_on_dead``) stay until the
    call is made: the cascade would delete the owed row.  Oldest
    ``finished_at`` first, through ``_jobs_finished``; the delete is
    primary-key lookups (``id = ANY(ARRAY(…))``: a join with the picked rows
    lets the planner hash them against a scan of the whole table).  Column and table
    names come from the mapped tables and the validated prefix.
    """
    n = models.names
    return sa.text(_MOVE.format(jobs=n.jobs, journal=n.journal, on_dead=n.on_dead, timeouts=n.timeouts,
                                traces=n.traces, archive=n.archive,
                                job_json=_compact(models.jobs_table, "g", JOB_KEYS),
                                entry_json=_compact(models.journal_table, "e", ENTRY_KEYS)))


def move_batch(models: Models, runner: Runner, params: MoveParams) -> tuple[int, datetime | None]:
    """Move one batch in ``runner``'s transaction; returns how many jobs moved and their newest ``finished_at``.

    The caller commits.  Fails (moving nothing) if today's partition is
    missing: call :func:`ensure_partitions` first, in a transaction of its own.
    A batch deletes the index entries it scanned over; pass its newest
    ``finished_at`` as the next batch's ``floor`` so that the next scan does
    not walk them again (until vacuum removes them, each batch would).
    """
    floor = params.floor or datetime(1, 1, 1, tzinfo=timezone.utc)
    row = runner.execute(move_statement(models),
                         {"after": params.after, "batch_size": params.batch_size, "floor": floor}).one()
    return int(row[0]), row[1]


# -- reading archived jobs as the jobs table's rows ---------------------------------------

def _is_jsonb(column: sa.Column[Any]) -> bool:
    """A JSON column (``JSON`` with its ``JSONB`` variant on PostgreSQL, as every venturi JSON column)."""
    return isinstance(column.type, sa.JSON)


def job_columns(models: Models, source: Any = None) -> list[Any]:
    """The ``<prefix>_jobs`` columns, in table order, decoded from an archive row (labelled as the columns).

    ``source`` is the archive table (the default) or a subquery of its columns.
    """
    archive = models.archive_table if source is None else source
    job = sa.type_coerce(archive.c.job, JSONB)
    direct = set(JOB_KEYS)
    columns: list[Any] = []
    for column in models.jobs_table.c:
        if column.name in direct:
            columns.append(archive.c[column.name].label(column.name))
        elif _is_jsonb(column):
            columns.append(sa.type_coerce(job[column.name], column.type).label(column.name))
        else:
            columns.append(sa.cast(job[column.name].astext, column.type).label(column.name))
    return columns


def job_statement(models: Models, job_id: str) -> sa.Select[Any]:
    """An archived job's row (the jobs table's columns), by id."""
    return sa.select(*job_columns(models)).where(models.archive_table.c.id == job_id)


def job_view_statement(models: Models, job_id: str) -> sa.Select[Any]:
    """An archived job as ``storage.history.job_view_statement`` returns a live one (fire and time limit)."""
    archive, fires = models.archive_table, models.fires_table
    return (sa.select(*job_columns(models), fires.c.schedule.label("fire_schedule"),
                      fires.c.fire_at.label("fire_at"), fires.c.fired_at.label("fired_at"),
                      archive.c.timeout.label("timeout"))
            .select_from(archive.outerjoin(fires, fires.c.job_id == archive.c.id))
            .where(archive.c.id == job_id))


def _entries(models: Models, job_id: str) -> tuple[Any, sa.Select[Any]]:
    archive = models.archive_table
    entry = sa.func.jsonb_array_elements(archive.c.journal).table_valued("value").lateral("entry")
    return entry, sa.select().select_from(archive).join(entry, sa.true()).where(archive.c.id == job_id)


def journal_statement(models: Models, job_id: str) -> sa.Select[Any]:
    """An archived job's journal rows (the journal table's columns), in ``id`` order."""
    entry, stmt = _entries(models, job_id)
    value = sa.type_coerce(entry.c.value, JSONB)
    columns = []
    for column in models.journal_table.c:
        if column.name in ENTRY_KEYS:  # the job's: job_id is its id
            own = "id" if column.name == "job_id" else column.name
            columns.append(models.archive_table.c[own].label(column.name))
        elif column.name == "attachment":
            columns.append(sa.type_coerce(value[column.name], column.type).label(column.name))
        else:
            columns.append(sa.cast(value[column.name].astext, column.type).label(column.name))
    return stmt.add_columns(*columns).order_by(sa.cast(value["id"].astext, sa.BigInteger))


def result_statement(models: Models, job_id: str) -> sa.Select[Any]:
    """``(status, result)`` of an archived job: the attachment of its last ``completed`` journal entry."""
    archive = models.archive_table
    entry = sa.func.jsonb_array_elements(archive.c.journal).table_valued("value").alias("entry")
    value = sa.type_coerce(entry.c.value, JSONB)
    last = (sa.select(sa.type_coerce(value["attachment"], models.journal_table.c.attachment.type))
            .select_from(entry).where(value["outcome"].astext == "completed")
            .order_by(sa.cast(value["id"].astext, sa.BigInteger).desc()).limit(1)
            .correlate(archive).scalar_subquery())
    return sa.select(archive.c.status, last.label("result")).where(archive.c.id == job_id)


def fetch_job(models: Models, runner: Runner, job_id: str) -> sa.Row[Any] | None:
    """The archived job's row as a jobs-table row, or None if it is not archived."""
    return runner.execute(job_statement(models, job_id)).first()


def fetch_job_view(models: Models, runner: Runner, job_id: str) -> sa.Row[Any] | None:
    """The archived job's view row (see :func:`job_view_statement`), or None if it is not archived."""
    return runner.execute(job_view_statement(models, job_id)).first()


def fetch_journal(models: Models, runner: Runner, job_id: str) -> Sequence[sa.Row[Any]]:
    """The archived job's journal rows in ``id`` order (empty if it is not archived)."""
    return runner.execute(journal_statement(models, job_id)).all()


def fetch_result(models: Models, runner: Runner, job_id: str) -> sa.Row[Any] | None:
    """``(status, result)`` of the archived job, or None if it is not archived."""
    return runner.execute(result_statement(models, job_id)).first()


# -- history across the live table and the archive ------------------------------------------

def history_statement_both(models: Models, params: HistoryParams) -> sa.Select[Any]:
    """A history page over ``<prefix>_jobs`` and the archive together, ``(created_at DESC, id DESC)``.

    Each branch is the page of its table (``limit + 1`` rows, keyset
    predicate and filters applied); the union is sorted and cut again.  One
    statement, one snapshot: a job moving while it runs is seen in exactly
    one branch, so keyset paging stays exact.  The archive branch is left
    out when the status filter admits no terminal status.
    """
    live = history_statement(models, params)
    if params.statuses and not {"completed", "dead"} & set(params.statuses):
        return live
    archive = models.archive_table
    arch = sa.select(*job_columns(models))
    if params.statuses:
        arch = arch.where(archive.c.status.in_(list(params.statuses)))
    if params.kind is not None:
        arch = arch.where(archive.c.kind == params.kind)
    if params.finished_after is not None:
        arch = arch.where(archive.c.finished_at >= params.finished_after)
    if params.finished_before is not None:
        arch = arch.where(archive.c.finished_at < params.finished_before)
    if params.after is not None:
        created_at, job_id = params.after
        arch = arch.where(sa.tuple_(archive.c.created_at, archive.c.id) < sa.tuple_(
            sa.literal(created_at, sa.DateTime(timezone=True)), sa.literal(job_id, sa.Text)))
    arch = arch.order_by(archive.c.created_at.desc(), archive.c.id.desc()).limit(params.limit + 1)
    both = sa.union_all(sa.select(live.subquery("live")), sa.select(arch.subquery("arch"))).subquery("page")
    return sa.select(*both.c).order_by(both.c.created_at.desc(), both.c.id.desc()).limit(params.limit + 1)


def fetch_history(models: Models, runner: Runner, params: HistoryParams) -> Sequence[sa.Row[Any]]:
    """One page plus at most one extra row, across both tables (see :func:`history_statement_both`)."""
    return runner.execute(history_statement_both(models, params)).all()


_COUNTS = """
WITH RECURSIVE pairs AS (
    (SELECT status, kind FROM {archive} ORDER BY status, kind LIMIT 1)
    UNION ALL
    SELECT nxt.status, nxt.kind
    FROM pairs, LATERAL (
        SELECT a.status, a.kind FROM {archive} AS a
        WHERE (a.status, a.kind) > (pairs.status, pairs.kind)
        ORDER BY a.status, a.kind LIMIT 1
    ) AS nxt
)
SELECT pairs.status, pairs.kind, counted.n
FROM pairs, LATERAL (
    SELECT count(*) AS n FROM {archive} AS a WHERE a.status = pairs.status AND a.kind = pairs.kind
) AS counted
"""


def counts(models: Models, runner: Runner) -> list[tuple[str, str, int]]:
    """``(status, kind, count)`` of the archive: a loose index scan of ``_archive_history``, as stats does."""
    rows = runner.execute(sa.text(_COUNTS.format(archive=models.names.archive)))
    return [(r[0], r[1], int(r[2])) for r in rows]


# -- moving a job back, and retention -----------------------------------------------------------

_RESTORE = """
WITH gone AS (
    DELETE FROM {archive} AS a WHERE a.id = :job_id AND a.status = 'dead'
    RETURNING a.*
), job AS (
    INSERT INTO {jobs} SELECT {job_columns} FROM gone AS g, jsonb_populate_record(NULL::{jobs}, g.job) AS r
    RETURNING id
), entries AS (
    INSERT INTO {journal} OVERRIDING SYSTEM VALUE
    SELECT {entry_columns} FROM gone AS g, jsonb_populate_recordset(NULL::{journal}, g.journal) AS r
), limits AS (
    INSERT INTO {timeouts} (job_id, timeout) SELECT g.id, g.timeout FROM gone AS g WHERE g.timeout IS NOT NULL
), traced AS (
    INSERT INTO {traces} (job_id, carrier) SELECT g.id, g.trace FROM gone AS g WHERE g.trace IS NOT NULL
)
SELECT count(*) FROM job
"""


def restore(models: Models, runner: Runner, job_id: str) -> bool:
    """Move an archived ``dead`` job back into ``<prefix>_jobs`` (with its journal, time limit and trace).

    One statement in the caller's transaction: on commit the job is live
    again (still ``dead``) and gone from the archive; on rollback it stays
    archived.  Journal ids are kept.  Returns False if the job is not an
    archived dead job.
    """
    n = models.names
    # JSON columns are taken as they are (jsonb_populate_record would make a JSON null SQL NULL); one left out
    # of the compact JSON was JSON null
    def column(c: sa.Column[Any], repeated: tuple[str, ...], json: str) -> str:
        if c.name in repeated:
            return "g.id" if c.name == "job_id" else f"g.{c.name}"
        return f"coalesce(g.{json} -> '{c.name}', 'null'::jsonb)" if _is_jsonb(c) and not c.nullable else f"r.{c.name}"

    jobs = ", ".join(column(c, JOB_KEYS, "job") for c in models.jobs_table.c)
    entries = ", ".join(column(c, ENTRY_KEYS, "journal") for c in models.journal_table.c)
    sql = _RESTORE.format(archive=n.archive, jobs=n.jobs, journal=n.journal, timeouts=n.timeouts, traces=n.traces,
                          job_columns=jobs, entry_columns=entries)
    return bool(runner.execute(sa.text(sql), {"job_id": job_id}).scalar_one())


def droppable(models: Models, runner: Runner, cutoff: datetime) -> list[str]:
    """Partitions whose whole day ends at or before ``cutoff``: every job in them finished before it.

    A job is archived after it finished, so ``finished_at < moved_at <
    the day's end <= cutoff``.  Oldest first.
    """
    days = partitions(models, runner)
    return [days[day] for day in sorted(days)
            if datetime.combine(day + timedelta(days=1), time(0), timezone.utc) <= cutoff]


def drop_partition(models: Models, runner: Runner, name: str) -> int:
    """Count then drop one partition (a name :func:`partitions` returned); returns the jobs it held.

    ``DROP TABLE`` takes ``ACCESS EXCLUSIVE`` on the archive until the
    caller commits; a lock not granted within ``LOCK_TIMEOUT`` raises (the
    partition stays, for the next cleanup).  On rollback nothing is dropped.
    """
    if name not in partitions(models, runner).values():
        raise ValueError(f"{name!r} is not a partition of {models.names.archive}")
    _lock(models, runner)
    held = int(runner.execute(sa.text(f"SELECT count(*) FROM {name}")).scalar_one())
    runner.execute(sa.text(f"DROP TABLE {name}"))
    return held


def _where(models: Models, params: CleanupParams) -> list[Any]:
    archive = models.archive_table
    clauses: list[Any] = [archive.c.finished_at < params.cutoff]
    if params.statuses:
        clauses.append(archive.c.status.in_(list(params.statuses)))
    if params.kind is not None:
        clauses.append(archive.c.kind == params.kind)
    if params.floor is not None:
        clauses.append(archive.c.finished_at >= params.floor)
    return clauses


def delete_batch(models: Models, runner: Runner, params: CleanupParams) -> tuple[int, datetime | None]:
    """Delete up to ``batch_size`` archived jobs matching ``params`` (rows locked ``SKIP LOCKED``).

    Returns how many and the newest ``finished_at`` among them (the next
    batch's ``floor``).  The caller commits.
    """
    archive = models.archive_table
    batch = (sa.select(archive.c.id, archive.c.moved_at).where(*_where(models, params))
             .order_by(archive.c.finished_at).limit(params.batch_size).with_for_update(skip_locked=True))
    stmt = (sa.delete(archive)
            .where(sa.tuple_(archive.c.id, archive.c.moved_at).in_(batch))
            .returning(archive.c.finished_at))
    finished = list(runner.execute(stmt).scalars())
    return len(finished), max(finished, default=None)


def count_matching(models: Models, runner: Runner, params: CleanupParams) -> int:
    """How many archived jobs match ``params`` now."""
    stmt = sa.select(sa.func.count()).select_from(models.archive_table).where(*_where(models, params))
    return int(runner.execute(stmt).scalar_one())


def archived_status(models: Models, runner: Runner, job_id: str) -> str | None:
    """The status of the archived job ``job_id``, or None if it is not archived."""
    value: str | None = runner.execute(
        sa.select(models.archive_table.c.status).where(models.archive_table.c.id == job_id)).scalar()
    return value
