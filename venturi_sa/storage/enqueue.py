"""Enqueue-side SQL, all run in the caller's Session and transaction.

Four functions, called by :mod:`venturi_sa.enqueue` and the schedule firer: insert new
jobs, lock dedup keys, find a merge target, record merges.  None of them
commits: the caller's commit publishes everything they wrote, its rollback
discards it, and a crash before commit leaves no trace.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql
from sqlalchemy.orm import Session

from venturi_sa.errors import InvalidPayload, UnsupportedIsolation
from venturi_sa.models import JobBase, Models
from venturi_sa.states import Outcome, Status
from venturi_sa.storage import job_documents
from venturi_sa.storage.faults import sqlstate
from venturi_sa.storage.merge_targets import merge_target_exclusions

# PostgreSQL runs READ UNCOMMITTED as READ COMMITTED.
DEDUP_ISOLATIONS = ("read committed", "read uncommitted")


@dataclass(frozen=True, kw_only=True)
class NewJob:
    """One row to insert: the values enqueue decides; the rest take their defaults."""

    id: str
    kind: str
    payload: Any  # JSON-ready (already dumped and checked)
    priority: int
    dedup_key: str | None = None


@dataclass(frozen=True, kw_only=True)
class NewJobColumns:
    """New rows as one sequence per column (all the same length): the bulk form of :class:`NewJob`."""

    ids: Sequence[str]
    kinds: Sequence[str]
    payloads: Sequence[Any]  # JSON-ready (already dumped and checked)
    priorities: Sequence[int]
    dedup_keys: Sequence[str | None]

    @classmethod
    def of(cls, jobs: Sequence[NewJob]) -> NewJobColumns:
        return cls(ids=[j.id for j in jobs], kinds=[j.kind for j in jobs], payloads=[j.payload for j in jobs],
                   priorities=[j.priority for j in jobs], dedup_keys=[j.dedup_key for j in jobs])


@dataclass(frozen=True, kw_only=True)
class InsertParams:
    """New jobs, all eligible at one time, inserted in one round trip (a batch over 64 MiB of JSON: a few).

    ``created_at`` is the INSERT's ``statement_timestamp()`` (the database
    clock at the enqueue call, not the caller's transaction start);
    ``visible_at`` is ``run_at`` if given, else ``created_at + delay``.
    With ``notify_channel``, the INSERT also sends ``pg_notify(channel,
    kind)`` once per kind, delivered only if the caller commits.
    """

    jobs: Sequence[NewJob] | NewJobColumns
    delay: timedelta | None = None
    run_at: datetime | None = None  # timezone-aware
    notify_channel: str | None = None


@dataclass(frozen=True, kw_only=True)
class DedupLockParams:
    """The ``(kind, dedup key)`` pairs whose merge decisions this transaction takes."""

    keys: Sequence[tuple[str, str]]


@dataclass(frozen=True, kw_only=True)
class MergeTargetParams:
    kind: str
    dedup_key: str


@dataclass(frozen=True, kw_only=True)
class MergeWrite:
    """One job that absorbed enqueues: its payload afterwards and one note per absorbed enqueue."""

    target: JobBase  # a pending job of the caller's session (row-locked by find_merge_target)
    payload: Any  # JSON-ready
    notes: Sequence[str]


@dataclass(frozen=True, kw_only=True)
class RecordMergesParams:
    merges: Sequence[MergeWrite]


def dedup_lock_key(prefix: str, kind: str, key: str) -> int:
    """A stable signed 64-bit advisory-lock key for ``(prefix, kind, key)``.

    Derived from a digest, not ``hash()``, so every process computes the same key.
    """
    digest = hashlib.blake2b(f"{prefix}\0{kind}\0{key}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


_ISOLATION = sa.func.current_setting("transaction_isolation")


def lock_dedup_keys(models: Models, session: Session, params: DedupLockParams) -> None:
    """Take a transaction-scoped advisory lock on each ``(kind, key)``, in sorted order, in one statement.

    The same statement reads the transaction's isolation level: under
    anything stricter than READ COMMITTED the snapshot predates the lock, so
    it takes no lock and raises :class:`UnsupportedIsolation`.  Sorted order
    means two callers taking overlapping keys cannot deadlock.  The locks are
    released when the caller commits or rolls back.
    """
    locks = sorted({dedup_lock_key(models.prefix, kind, key) for kind, key in params.keys})
    key = sa.func.unnest(sa.bindparam("locks", locks, type_=postgresql.ARRAY(sa.BigInteger))).alias("k")
    taken = (
        sa.select(sa.func.count())
        .select_from(key)
        .join(sa.func.pg_advisory_xact_lock(sa.column("k")).alias("held"), sa.true())
        .scalar_subquery()
    )
    stmt = sa.select(_ISOLATION, sa.case((_ISOLATION.in_(DEDUP_ISOLATIONS), taken)))
    isolation, _ = session.execute(stmt).one()
    if isolation not in DEDUP_ISOLATIONS:
        raise UnsupportedIsolation(
            f"enqueue with a dedup key needs READ COMMITTED, but this transaction is {isolation.upper()}: "
            "its snapshot predates the dedup lock, so duplicates could get through; enqueue deduplicated "
            "tasks in a READ COMMITTED transaction (PostgreSQL's default)"
        )


def oldest_pending_sibling(models: Models, session: Session, params: MergeTargetParams) -> JobBase | None:
    """The oldest pending job of ``kind`` with ``dedup_key == key`` that may absorb an enqueue, locked ``FOR UPDATE``.

    The one choice of merge target: jobs that are pending but must not
    absorb enqueues are left out (:func:`~venturi_sa.storage.merge_targets.merge_target_exclusions`).

    Waits (no SKIP LOCKED) if a worker is claiming it; PostgreSQL then
    re-checks ``status = 'pending'`` on the new row version, so a job that
    was just claimed is never returned.  The row is reloaded into the
    session (``populate_existing``): flush the session's own changes first.
    """
    job = models.Job
    stmt = (
        sa.select(job)
        .where(job.kind == params.kind, job.dedup_key == params.dedup_key, job.status == Status.PENDING.value,
               *merge_target_exclusions(models))  # jobs pending but not merge targets (waiting on parents, ...)
        .order_by(job.created_at, job.id)
        .limit(1)
        .with_for_update()
        .execution_options(populate_existing=True)
    )
    return session.execute(stmt).scalars().first()


def record_merges(models: Models, session: Session, params: RecordMergesParams) -> None:
    """Give each target its merged payload and one ``merged`` journal row per absorbed enqueue; flush.

    The journal rows carry the target's current ``run_count`` as ``run_no``.
    """
    for merge in params.merges:
        if merge.target.payload != merge.payload:
            merge.target.payload = merge.payload
        session.add_all(
            models.JournalEntry(job_id=merge.target.id, kind=merge.target.kind, run_no=merge.target.run_count,
                                outcome=Outcome.MERGED.value, note=note)
            for note in merge.notes
        )
    with _guarded("a merged payload"):
        session.flush()


_INSERTS: dict[tuple[Any, ...], Any] = {}

_REFUSED_DATA = ("22", "54")  # SQLSTATE classes: data exception, program limit exceeded


def _primary(error: BaseException) -> str:
    """The database's one-line message, cut before any quoted value (values may be payload)."""
    text = getattr(getattr(error, "diag", None), "message_primary", None)
    if not isinstance(text, str) or not text:
        lines = str(error).splitlines()
        text = lines[0] if lines else type(error).__name__
    return text.split('"', 1)[0].rstrip(": ")[:200]


@contextmanager
def _guarded(what: str) -> Iterator[None]:
    """Run an enqueue write so that no database error carries the job rows into its message.

    A data error (SQLSTATE class 22 or 54: a value the database refuses)
    becomes ``InvalidPayload``; any other driver error is raised again as
    the same SQLAlchemy class with its parameters hidden.  The caller's
    transaction is failed either way: roll it back.
    """
    try:
        yield
    except sa.exc.DBAPIError as exc:
        if exc.orig is None:
            raise
        code = sqlstate(exc) or ""
        if code[:2] in _REFUSED_DATA:
            raise InvalidPayload(f"the database refused {what} (SQLSTATE {code}: {_primary(exc.orig)}); "
                                 "this enqueue wrote nothing: roll the transaction back") from None
        if exc.hide_parameters:
            raise
        raise type(exc)(exc.statement, exc.params, exc.orig, hide_parameters=True,
                        connection_invalidated=exc.connection_invalidated, code=exc.code,
                        ismulti=exc.ismulti) from None


def enqueue_time() -> Any:
    """The database clock at the INSERT statement (``statement_timestamp()``): a new job's ``created_at``."""
    return sa.func.statement_timestamp()


def visible_time(run_at: Any, delay: Any) -> Any:
    """``visible_at`` of a new job: ``run_at`` if not NULL, else the INSERT's clock plus ``delay``."""
    return sa.func.coalesce(run_at, enqueue_time() + delay)


def notified(kinds: Any, channel: Any) -> Any:
    """A scalar subquery sending ``pg_notify(channel, kind)`` once per element of the array ``kinds``.

    Delivered when the caller's transaction commits, dropped on rollback.
    """
    woken = sa.func.unnest(kinds).alias("woken")
    return (
        sa.select(sa.func.count())
        .select_from(woken)
        .join(sa.func.pg_notify(channel, sa.column("woken")).alias("n"), sa.true())
        .scalar_subquery()
    )


def _array(name: str, element: Any) -> Any:
    return sa.cast(sa.bindparam(name, type_=postgresql.ARRAY(sa.Text)), postgresql.ARRAY(element))


def _insert(models: Models) -> Any:
    """``INSERT ... SELECT FROM jsonb_array_elements(document)``, without ``RETURNING``.

    One JSON parameter whatever the batch size: the statement text never
    changes, so it is compiled once and each batch is one round trip.  An
    uncorrelated subquery in ``WHERE`` (a one-time filter, run once) sends
    the statement's ``pg_notify`` calls.
    """
    key = (models.prefix, id(models.Job))
    if key not in _INSERTS:
        sends = notified(_array("notify_kinds", sa.Text), sa.bindparam("channel", type_=sa.Text))
        run_at = sa.bindparam("run_at", type_=sa.DateTime(timezone=True))
        delay = sa.bindparam("delay", type_=sa.Interval)
        source = sa.select(
            *job_documents.as_rows(), sa.literal(Status.PENDING.value), enqueue_time(), visible_time(run_at, delay),
        ).where(sends >= 0)
        columns = ["id", "kind", "payload", "priority", "dedup_key", "status", "created_at", "visible_at"]
        _INSERTS[key] = sa.insert(models.jobs_table).from_select(columns, source)
    return _INSERTS[key]


def _insert_returning_jobs(models: Models) -> Any:
    """:func:`_insert` with ``RETURNING *``, loaded as ``Job`` objects of the session."""
    key = (models.prefix, -id(models.Job))
    if key not in _INSERTS:
        insert = _insert(models).returning(*models.jobs_table.c)
        _INSERTS[key] = sa.select(models.Job).from_statement(insert)
    return _INSERTS[key]


def _insert_one_returning_job(models: Models, notify: bool) -> Any:
    """``INSERT ... VALUES (one row) RETURNING *`` loaded as a ``Job``: the one-job form of :func:`_insert`.

    The same row; with ``notify``, the ``kind`` value is ``(SELECT :kind FROM
    pg_notify(:channel, :kind))``, so the statement sends the NOTIFY.  Its
    plan is a single ``Result`` node: PostgreSQL plans it in a fraction of
    the time of the bulk form (psycopg2 sends no prepared statements,
    so every enqueue pays planning).
    """
    key = (models.prefix, id(models.Job), notify)
    if key not in _INSERTS:
        kind: Any = sa.bindparam("kind", type_=sa.Text)
        if notify:
            sent = sa.func.pg_notify(sa.bindparam("channel", type_=sa.Text), kind).alias("sent")
            kind = sa.select(kind).select_from(sent).scalar_subquery()
        run_at = sa.bindparam("run_at", type_=sa.DateTime(timezone=True))
        delay = sa.bindparam("delay", type_=sa.Interval)
        insert = sa.insert(models.jobs_table).values(
            id=sa.bindparam("id", type_=sa.Text), kind=kind,
            payload=sa.cast(sa.bindparam("payload", type_=sa.Text), postgresql.JSONB),
            priority=sa.bindparam("priority", type_=sa.SmallInteger),
            dedup_key=sa.bindparam("dedup_key", type_=sa.Text),
            status=Status.PENDING.value, created_at=enqueue_time(), visible_at=visible_time(run_at, delay),
        ).returning(*models.jobs_table.c)
        _INSERTS[key] = sa.select(models.Job).from_statement(insert)
    return _INSERTS[key]


def _values(params: InsertParams) -> tuple[list[str], list[dict[str, Any]]]:
    """The ids in order and the bind values of each :func:`_insert` that writes ``params`` (one, unless huge)."""
    cols = params.jobs if isinstance(params.jobs, NewJobColumns) else NewJobColumns.of(params.jobs)
    ids = list(cols.ids)
    rows = list(zip(ids, cols.kinds, cols.payloads, cols.priorities, cols.dedup_keys, strict=True))
    common = {
        "notify_kinds": sorted(set(cols.kinds)) if params.notify_channel else [],
        "channel": params.notify_channel or "",
        "run_at": params.run_at,
        "delay": params.delay or timedelta(0),
    }
    return ids, [{"jobs": document, **common} for document in job_documents.documents(rows)]


def insert_jobs(models: Models, session: Session, params: InsertParams) -> list[JobBase]:
    """Insert ``params.jobs`` in one round trip; return them, in order, as ``Job`` objects of ``session``.

    The rows take their times from the database clock (see :class:`InsertParams`);
    a batch of huge payloads takes one round trip per part (``job_documents.documents``).
    """
    if not isinstance(params.jobs, NewJobColumns) and len(params.jobs) == 1:
        [new] = params.jobs
        one = {"id": new.id, "kind": new.kind, "payload": json.dumps(new.payload), "priority": new.priority,
               "dedup_key": new.dedup_key, "run_at": params.run_at, "delay": params.delay or timedelta(0)}
        if params.notify_channel:
            one["channel"] = params.notify_channel
        session.flush()  # the session's own pending changes, outside the guard: their errors are theirs
        with _guarded("the new job"):
            return list(session.scalars(_insert_one_returning_job(models, bool(params.notify_channel)), one))
    ids, statements = _values(params)
    session.flush()
    by_id: dict[str, JobBase] = {}
    with _guarded("the new jobs"):
        for values in statements:
            by_id.update((job.id, job) for job in session.scalars(_insert_returning_jobs(models), values))
    return [by_id[job_id] for job_id in ids]


def insert_rows(models: Models, session: Session, params: InsertParams) -> None:
    """Insert ``params.jobs`` in one round trip on the session's connection, loading nothing back.

    The same statement as :func:`insert_jobs` without ``RETURNING``: no
    ``Job`` object is built, the session's identity map is untouched and
    nothing pending in the session is flushed (a batch of huge payloads takes one round
    trip per part, as there).  It runs in the session's transaction, so the
    caller's commit publishes the rows and its ``NOTIFY``; rollback discards both.
    """
    _, statements = _values(params)
    # The session's connection, not session.execute: a Core statement there would autoflush.
    connection = session.connection(bind_arguments={"mapper": sa.inspect(models.Job)})
    with _guarded("the new jobs"):
        for values in statements:
            connection.execute(_insert(models), values)


__all__ = [
    "DedupLockParams",
    "InsertParams",
    "MergeTargetParams",
    "MergeWrite",
    "NewJob",
    "NewJobColumns",
    "RecordMergesParams",
    "dedup_lock_key",
    "enqueue_time",
    "insert_jobs",
    "insert_rows",
    "lock_dedup_keys",
    "notified",
    "oldest_pending_sibling",
    "record_merges",
    "visible_time",
]
