"""The archive's partitions and moves: terminal jobs out of ``<prefix>_jobs``, and a dead one back.

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
  time limit, its trace context, its durable steps and signals, its
  limit key and, for a dependent (``after=``), its dependency links and its
  count of unfinished parents (keys ``after`` and ``waits`` of the ``job``
  JSON, which no column of the jobs table is named), and for a parent, the
  ids and policies of the jobs that name it in ``after=`` (key
  ``dependents``).  A dependent whose ended parent is still in the jobs
  table stays there until that parent moves (in the same batch, or a later
  one), so that the parent's ``dependents`` list names it.  The journal,
  time-limit, trace, step, signal, limit-key, dependency and cancel-request
  rows go from their tables by the ``ON DELETE CASCADE`` that fires at the
  end of the same statement; the statement's snapshot still reads them.
  On commit whole jobs have moved; on rollback or a crash none has (one
  transaction), so a job is always in exactly one place.
* :func:`restore` (the move back) locks the row it deletes, and first the
  dependent's unfinished parents ``FOR KEY SHARE`` (as an enqueue with
  ``after=`` does: a parent's terminal write locks it ``FOR UPDATE`` before
  it settles, so it waits for this transaction, and the lease renewal of a
  running parent is never held back), so that no parent's outcome commits
  unseen between the read of its status and the links put back.
* Dropping a day (:mod:`~venturi_sa.storage.archive_retention`) takes
  ``ACCESS EXCLUSIVE`` on the parent; reads
  (:mod:`~venturi_sa.storage.archive_reads`) are plain ``SELECT`` without locks.

Nothing here commits.  Table and partition names come from the validated
prefix and from dates computed here, never from user input.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta, timezone
from typing import Any, cast

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import ARRAY

from venturi_sa.models import Models
from venturi_sa.storage import dependents
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


def lock_archive(models: Models, runner: Runner) -> None:
    """Take the advisory lock on ``models``' partitions until the transaction ends, waiting ``LOCK_TIMEOUT`` at most."""
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
    lock_archive(models, runner)
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
WITH candidates AS MATERIALIZED (
    SELECT j.id, j.finished_at FROM {jobs} AS j
    WHERE j.status IN ('completed', 'dead') AND j.finished_at < now() - CAST(:after AS interval)
      AND j.finished_at >= CAST(:floor AS timestamptz)
      AND NOT EXISTS (SELECT 1 FROM {on_dead} AS o WHERE o.job_id = j.id)
      AND {no_live_dependent}
    ORDER BY j.finished_at
    LIMIT :batch_size
    FOR UPDATE OF j SKIP LOCKED
), picked AS MATERIALIZED (
    SELECT c.id FROM candidates AS c
    WHERE NOT EXISTS (SELECT 1 FROM {parents} AS up JOIN {jobs} AS pj ON pj.id = up.parent_id
                      WHERE up.job_id = c.id AND pj.status IN ('completed', 'dead')
                        AND pj.id NOT IN (SELECT k.id FROM candidates AS k) OFFSET 0)
), gone AS (
    DELETE FROM {jobs} AS j WHERE j.id = ANY(ARRAY(SELECT id FROM picked))
    RETURNING j.*
), moved AS (
    INSERT INTO {archive} (id, kind, status, created_at, finished_at, moved_at, job, journal, timeout, trace,
                           steps, signals, limit_key)
    SELECT g.id, g.kind, g.status, g.created_at, g.finished_at, now(), {job_json} || {kept_links},
           coalesce((SELECT jsonb_agg({entry_json} ORDER BY e.id) FROM {journal} AS e WHERE e.job_id = g.id),
                    '[]'::jsonb),
           (SELECT t.timeout FROM {timeouts} AS t WHERE t.job_id = g.id),
           (SELECT r.carrier FROM {traces} AS r WHERE r.job_id = g.id),
           (SELECT jsonb_agg(to_jsonb(s) - 'job_id' ORDER BY s.started_at, s.name)
            FROM {steps} AS s WHERE s.job_id = g.id),
           (SELECT jsonb_agg(to_jsonb(x) - 'job_id' ORDER BY x.sent_at, x.name)
            FROM {signals} AS x WHERE x.job_id = g.id),
           (SELECT k.key FROM {limit_keys} AS k WHERE k.job_id = g.id)
    FROM gone AS g
    RETURNING id
)
SELECT (SELECT count(*) FROM moved), (SELECT count(*) FROM candidates), (SELECT max(finished_at) FROM candidates)
"""


JOB_KEYS = ("id", "kind", "status", "created_at", "finished_at")
"""Job columns the archive holds as columns of its own, left out of its ``job`` JSON."""
ENTRY_KEYS = ("job_id", "kind")
"""Journal columns every entry of a job shares with the job, left out of the ``journal`` JSON."""


def is_jsonb(column: sa.Column[Any]) -> bool:
    """A JSON column (``JSON`` with its ``JSONB`` variant on PostgreSQL, as every venturi JSON column)."""
    return isinstance(column.type, sa.JSON)


def _compact(table: sa.Table, alias: str, repeated: tuple[str, ...]) -> str:
    """``to_jsonb(alias)`` without the ``repeated`` keys, nor the keys whose value is NULL (JSON null for JSON).

    Only top-level keys go (a payload's own nulls stay); reading a missing
    key gives NULL, which decodes as the value left out did.
    """
    dropped = ", ".join(f"'{name}'" for name in repeated)
    empty = [f"CASE WHEN {alias}.{c.name} = 'null'::jsonb THEN '{c.name}' END" if is_jsonb(c) else
             f"CASE WHEN {alias}.{c.name} IS NULL THEN '{c.name}' END"
             for c in table.c if c.name not in repeated and (c.nullable or is_jsonb(c))]
    return f"to_jsonb({alias}) - ARRAY[{dropped}] - array_remove(ARRAY[{', '.join(empty)}], NULL)"


_KEPT_LINKS = (
    "coalesce((SELECT jsonb_build_object('after', jsonb_agg(to_jsonb(p) - 'job_id' ORDER BY p.position)) "
    "FROM {parents} AS p WHERE p.job_id = g.id HAVING count(*) > 0), '{{}}'::jsonb) || "
    "coalesce((SELECT jsonb_build_object('waits', to_jsonb(w) - 'job_id') FROM {waits} AS w "
    "WHERE w.job_id = g.id), '{{}}'::jsonb) || "
    "coalesce((SELECT jsonb_build_object('dependents', jsonb_agg(to_jsonb(d) ORDER BY d.job_id, d.policy)) "
    "FROM (SELECT DISTINCT c.job_id, c.policy FROM {parents} AS c WHERE c.parent_id = g.id) AS d "
    "HAVING count(*) > 0), '{{}}'::jsonb)")


def _limit_keys(models: Models) -> str:
    table: sa.Table = cast(Any, models.Limits.Key).__table__
    return table.name


def move_statement(models: Models) -> sa.TextClause:
    """The move (see the module docstring); binds ``after`` (an interval) and ``batch_size``.

    Jobs with an owed ``on_dead`` call (``<prefix>_on_dead``) stay until the
    call is made: the cascade would delete the owed row.  A dependent's
    ``<prefix>_parents`` rows (each without ``job_id``, in position order) and
    its ``<prefix>_waits`` row are kept as the ``after`` and ``waits`` keys of
    the ``job`` JSON, and a parent's dependents (``job_id`` and ``policy`` of
    the ``<prefix>_parents`` rows naming it, each pair once, in id order) as
    its ``dependents`` key; a parent whose dependents have not ended stays,
    and so does a dependent with an ended parent that stays (a parent that
    has not ended does not hold it: a dependent it never ran for, killed or
    cancelled, moves without it).  Oldest
    ``finished_at`` first, through ``_jobs_finished``; the delete is
    primary-key lookups (``id = ANY(ARRAY(…))``: a join with the picked rows
    lets the planner hash them against a scan of the whole table).  Column and table
    names come from the mapped tables and the validated prefix.
    """
    n = models.names
    return sa.text(_MOVE.format(jobs=n.jobs, parents=models.workflow.parents_table.name, journal=n.journal,
                                on_dead=n.on_dead, timeouts=n.timeouts,
                                traces=n.traces, archive=n.archive, steps=models.steps_table.name,
                                signals=models.signals_table.name, limit_keys=_limit_keys(models),
                                no_live_dependent=dependents.no_live_dependent_sql(models, "j.id"),
                                job_json=_compact(models.jobs_table, "g", JOB_KEYS),
                                kept_links=_KEPT_LINKS.format(parents=models.workflow.parents_table.name,
                                                              waits=models.workflow.waits_table.name),
                                entry_json=_compact(models.journal_table, "e", ENTRY_KEYS)))


@dataclass(frozen=True)
class Moved:
    """What one :func:`move_batch` did: ``moved`` jobs of the ``picked`` ones (a dependent waiting for its
    ended parent to move is picked and stays), and the newest ``finished_at`` picked (None: none)."""

    moved: int
    picked: int
    newest: datetime | None


def move_batch(models: Models, runner: Runner, params: MoveParams) -> Moved:
    """Move one batch in ``runner``'s transaction (see :class:`Moved`).

    The caller commits.  Fails (moving nothing) if today's partition is
    missing: call :func:`ensure_partitions` first, in a transaction of its own.
    A batch walks the index entries of the jobs it picked; pass its newest
    ``finished_at`` as the next batch's ``floor`` so that the next scan does
    not walk them again (until vacuum removes the deleted ones, each batch
    would).  A batch that picked fewer than ``batch_size`` was the last.
    """
    floor = params.floor or datetime(1, 1, 1, tzinfo=timezone.utc)
    row = runner.execute(move_statement(models),
                         {"after": params.after, "batch_size": params.batch_size, "floor": floor}).one()
    return Moved(int(row[0]), int(row[1]), row[2])


# -- moving a dead job back ----------------------------------------------------------------------

_RESTORE = """
WITH gone AS (
    DELETE FROM {archive} AS a WHERE a.id = ANY(CAST(:ids AS text[])) AND a.status = 'dead'
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
), stepped AS (
    INSERT INTO {steps} SELECT {step_columns}
    FROM gone AS g, jsonb_array_elements(coalesce(g.steps, '[]'::jsonb)) AS e,
         jsonb_populate_record(NULL::{steps}, e.value) AS r
), signalled AS (
    INSERT INTO {signals} SELECT {signal_columns}
    FROM gone AS g, jsonb_array_elements(coalesce(g.signals, '[]'::jsonb)) AS e,
         jsonb_populate_record(NULL::{signals}, e.value) AS r
), keyed AS (
    INSERT INTO {limit_keys} (job_id, kind, key) SELECT g.id, g.kind, g.limit_key FROM gone AS g
    WHERE g.limit_key IS NOT NULL
), linked AS (
    INSERT INTO {parents} (job_id, position, parent_id, policy, done)
    SELECT g.id, r.position, r.parent_id, r.policy,
           r.done OR NOT EXISTS (SELECT 1 FROM {jobs} AS pj
                                 WHERE pj.id = r.parent_id AND pj.status IN ('pending', 'claimed'))
    FROM gone AS g, jsonb_array_elements(coalesce(g.job -> 'after', '[]'::jsonb)) AS e,
         jsonb_populate_record(NULL::{parents}, e.value) AS r
    RETURNING job_id, done
), waited AS (
    INSERT INTO {waits} (job_id, remaining, not_before, killed_by)
    SELECT g.id, (SELECT count(*) FROM linked AS l WHERE l.job_id = g.id AND NOT l.done), r.not_before, r.killed_by
    FROM gone AS g, jsonb_populate_record(NULL::{waits}, g.job -> 'waits') AS r
    WHERE g.job -> 'waits' IS NOT NULL
)
SELECT id FROM job ORDER BY id
"""
_LOCK_LINKED = """
SELECT j.id FROM {jobs} AS j
WHERE j.id = ANY(ARRAY(SELECT e.value ->> 'parent_id'
                       FROM {archive} AS a, jsonb_array_elements(a.job -> 'after') AS e
                       WHERE a.id = ANY(CAST(:ids AS text[])) AND a.status = 'dead'))
  AND j.status IN ('pending', 'claimed')
ORDER BY j.id
FOR KEY SHARE OF j
"""


def restore(models: Models, runner: Runner, job_id: str) -> bool:
    """Move an archived ``dead`` job back (:func:`restore_many`); False if it is not an archived dead job."""
    return bool(restore_many(models, runner, [job_id]))


def restore_many(models: Models, runner: Runner, job_ids: Sequence[str]) -> list[str]:
    """Move archived ``dead`` jobs back into ``<prefix>_jobs`` (with everything the move kept of them).

    In the caller's transaction: on commit the job is live again (still
    ``dead``) and gone from the archive; on rollback it stays archived.
    Journal ids are kept.  A dependent gets its dependency links and its
    count row back: a link counts as done if it was, or if its parent is no
    longer pending or claimed (it ended while the dependent was archived),
    and the count is the links not done.  Its unfinished parents are first
    locked ``FOR KEY SHARE`` until the caller's transaction ends (needs READ
    COMMITTED, as ``after=`` does).  Two statements, whatever the number
    of jobs.  Returns the ids moved back, in id order (those of
    ``job_ids`` that were archived ``dead`` jobs).
    """
    n = models.names
    # JSON columns are taken as they are (jsonb_populate_record would make a JSON null SQL NULL); one left out
    # of the compact JSON was JSON null
    def column(c: sa.Column[Any], repeated: tuple[str, ...], json: str) -> str:
        if c.name in repeated:
            return "g.id" if c.name == "job_id" else f"g.{c.name}"
        return f"coalesce(g.{json} -> '{c.name}', 'null'::jsonb)" if is_jsonb(c) and not c.nullable else f"r.{c.name}"

    def element(c: sa.Column[Any]) -> str:  # a kept step or signal: its JSON values as they are (JSON null stays)
        return "g.id" if c.name == "job_id" else f"e.value -> '{c.name}'" if is_jsonb(c) else f"r.{c.name}"

    jobs = ", ".join(column(c, JOB_KEYS, "job") for c in models.jobs_table.c)
    entries = ", ".join(column(c, ENTRY_KEYS, "journal") for c in models.journal_table.c)
    parents, waits = models.workflow.parents_table.name, models.workflow.waits_table.name
    ids = sa.bindparam("ids", list(job_ids), type_=ARRAY(sa.Text))
    runner.execute(sa.text(_LOCK_LINKED.format(jobs=n.jobs, archive=n.archive)).bindparams(ids)).all()
    sql = _RESTORE.format(archive=n.archive, jobs=n.jobs, journal=n.journal, timeouts=n.timeouts, traces=n.traces,
                          steps=models.steps_table.name, signals=models.signals_table.name,
                          parents=parents, waits=waits,
                          limit_keys=_limit_keys(models), job_columns=jobs, entry_columns=entries,
                          step_columns=", ".join(element(c) for c in models.steps_table.c),
                          signal_columns=", ".join(element(c) for c in models.signals_table.c))
    return list(runner.execute(sa.text(sql).bindparams(ids)).scalars())


_KILLED = """
SELECT a.id FROM {archive} AS a
WHERE a.status = 'dead' AND a.job -> 'waits' ->> 'killed_by' = ANY(CAST(:parents AS text[]))
  AND a.finished_at >= (SELECT min(j.created_at) FROM {jobs} AS j WHERE j.id = ANY(CAST(:parents AS text[])))
ORDER BY a.id
"""


def restore_killed(models: Models, runner: Runner, parents: Sequence[str]) -> list[str]:
    """Move back (:func:`restore_many`) the archived dependents that the deaths of the live jobs ``parents`` killed.

    For ``requeue(..., with_dependents=True)``: they are then live and
    ``dead``, with their links, as if they had never moved.  One read of
    the archived ``dead`` jobs that finished since the oldest of
    ``parents`` was created (a dependent a parent killed died after it was
    enqueued), then :func:`restore_many`.  Returns their ids; the caller
    commits.
    """
    n = models.names
    stmt = sa.text(_KILLED.format(archive=n.archive, jobs=n.jobs)).bindparams(
        sa.bindparam("parents", list(parents), type_=ARRAY(sa.Text)))
    found = list(runner.execute(stmt).scalars())
    return restore_many(models, runner, found) if found else []
