"""Mapped classes for one queue prefix: ``<prefix>_jobs``, ``<prefix>_journal`` and the feature tables.

``<prefix>_schedules`` and ``<prefix>_fires`` (migration v4) hold periodic
jobs; ``<prefix>_pauses`` and ``<prefix>_cancels`` (migration v5) hold
runtime control state: paused kinds and cancel requests for running jobs.

The tables describe the seed DDL exactly on PostgreSQL.  The JSON columns
are ``JSON`` with a ``JSONB`` variant for PostgreSQL (and the journal id an
``INTEGER`` on SQLite), so an application whose test suite runs on SQLite
can ``Base.metadata.create_all`` with venturi's tables among its models; the
queue itself (enqueue, workers, operations) needs PostgreSQL.  Every index and constraint has an
explicit name equal to PostgreSQL's own default for that DDL, wrapped in
``conv()`` so a project's ``naming_convention`` cannot rename it; Alembic
autogenerate against a database migrated by ``alembic_venturi`` therefore
reports no differences.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, TypeVar, cast

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.elements import conv
from ulid import ULID

from venturi_sa.archive_models import ArchivedJobBase, archive_args, archive_columns
from venturi_sa.prefix import Names
from venturi_sa.states import OUTCOMES, STATUSES, Status

NORMAL_PRIORITY = 1
T = TypeVar("T")


def new_job_id() -> str:
    """A fresh ULID in its canonical 26-character form."""
    return str(ULID())


_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"  # ULID's base32 digits
_PAIRS = [a + b for a in _CROCKFORD for b in _CROCKFORD]  # 10 bits -> 2 digits
_RANDOM_BITS = 80


def _ulid_text(value: int) -> str:
    """The 26 base32 digits of a 128-bit ULID value (the first digit holds its top 3 bits)."""
    pairs = "".join(_PAIRS[(value >> shift) & 1023] for shift in range(110, -1, -10))
    return _CROCKFORD[value >> 125] + _CROCKFORD[(value >> 120) & 31] + pairs


def new_job_ids(n: int) -> list[str]:
    """``n`` fresh ULIDs of one millisecond, increasing in the order given (ULID's monotonic form).

    The first takes 79 random bits (the top random bit cleared, so adding
    up to 2**79 never carries into the timestamp); each next one is the
    previous plus one, so only its last four digits need encoding (the
    rest is re-encoded once per 2**20 ids).
    """
    first = (time.time_ns() // 1_000_000) << _RANDOM_BITS | int.from_bytes(os.urandom(10), "big") >> 1
    ids: list[str] = []
    high, prefix = -1, ""
    for value in range(first, first + max(0, n)):
        if value >> 20 != high:
            high, prefix = value >> 20, _ulid_text(value)[:22]
        ids.append(prefix + _PAIRS[(value >> 10) & 1023] + _PAIRS[value & 1023])
    return ids


def json_column_type(none_as_null: bool = False) -> sa.types.TypeEngine[Any]:
    """``JSONB`` on PostgreSQL, plain ``JSON`` elsewhere (so an SQLite test suite can ``create_all``)."""
    return sa.JSON(none_as_null=none_as_null).with_variant(postgresql.JSONB(none_as_null=none_as_null),
                                                           "postgresql")


class JsonNullDefault(sa.sql.expression.ColumnElement[Any]):
    """The server default JSON ``null``: ``'null'::jsonb`` on PostgreSQL, ``'null'`` elsewhere."""

    inherit_cache = True


@compiles(JsonNullDefault)
def _json_null_default(element: JsonNullDefault, compiler: SQLCompiler, **kw: Any) -> str:
    return "'null'"


@compiles(JsonNullDefault, "postgresql")
def _json_null_default_pg(element: JsonNullDefault, compiler: SQLCompiler, **kw: Any) -> str:
    return "'null'::jsonb"


def _in_list(column: str, values: tuple[str, ...]) -> str:
    quoted = ", ".join(f"'{value}'" for value in values)
    return f"{column} IN ({quoted})"


class JobBase:
    """Columns and helpers shared by every prefix's ``Job`` class (typing aid)."""

    __venturi_prefix__: str
    id: Mapped[str]
    kind: Mapped[str]
    payload: Mapped[Any]
    priority: Mapped[int]
    status: Mapped[str]
    created_at: Mapped[datetime]
    visible_at: Mapped[datetime]
    claim_expires_at: Mapped[datetime | None]
    claimed_by: Mapped[str | None]
    finished_at: Mapped[datetime | None]
    run_count: Mapped[int]
    failure_count: Mapped[int]
    carry: Mapped[Any]
    dedup_key: Mapped[str | None]

    if TYPE_CHECKING:
        time_limit: Mapped[JobTimeoutBase | None]
        """The job's own time limit row (``<prefix>_timeouts``), saved with the job; None: its task's."""

        def __init__(self, **columns: Any) -> None: ...

    def __repr__(self) -> str:
        return f"<Job {self.id} {self.kind} {self.status}>"


class JournalEntryBase:
    """Columns shared by every prefix's ``JournalEntry`` class (typing aid)."""

    __venturi_prefix__: str
    id: Mapped[int]
    job_id: Mapped[str]
    kind: Mapped[str]
    run_no: Mapped[int]
    recorded_at: Mapped[datetime]
    outcome: Mapped[str]
    note: Mapped[str | None]
    attachment: Mapped[Any]

    if TYPE_CHECKING:

        def __init__(self, **columns: Any) -> None: ...

    def __repr__(self) -> str:
        return f"<JournalEntry {self.job_id} run {self.run_no} {self.outcome}>"


class ScheduleRowBase:
    """Columns of every prefix's ``Schedule`` class: one declared schedule (typing aid)."""

    __venturi_prefix__: str
    name: Mapped[str]
    kind: Mapped[str]
    payload: Mapped[Any]
    priority: Mapped[int]
    timing: Mapped[str]
    tz: Mapped[str]
    catch_up: Mapped[str]
    overlap: Mapped[str]
    next_at: Mapped[datetime]
    last_at: Mapped[datetime | None]
    last_job: Mapped[str | None]
    paused: Mapped[bool]
    removed_at: Mapped[datetime | None]
    fired: Mapped[int]
    skipped: Mapped[int]
    updated: Mapped[datetime]

    if TYPE_CHECKING:

        def __init__(self, **columns: Any) -> None: ...


class PauseBase:
    """Columns of every prefix's ``Pause`` class: one pause of a kind (``'*'`` = every kind)."""

    __venturi_prefix__: str
    id: Mapped[int]
    kind: Mapped[str]
    reason: Mapped[str | None]
    actor: Mapped[str]
    paused_at: Mapped[datetime]
    resume_at: Mapped[datetime | None]
    resumed_at: Mapped[datetime | None]
    resumed_by: Mapped[str | None]

    if TYPE_CHECKING:

        def __init__(self, **columns: Any) -> None: ...

    def __repr__(self) -> str:
        return f"<Pause {self.kind} by {self.actor}>"


class FireRowBase:
    """Columns of every prefix's ``Fire`` class: one fired (schedule, fire time) (typing aid)."""

    __venturi_prefix__: str
    schedule: Mapped[str]
    fire_at: Mapped[datetime]
    job_id: Mapped[str]
    fired_at: Mapped[datetime]

    if TYPE_CHECKING:

        def __init__(self, **columns: Any) -> None: ...


class CancelRequestBase:
    """Columns of every prefix's ``CancelRequest`` class: a durable cancel of a claimed job."""

    __venturi_prefix__: str
    job_id: Mapped[str]
    run_no: Mapped[int]
    actor: Mapped[str]
    note: Mapped[str | None]
    created_at: Mapped[datetime]

    if TYPE_CHECKING:

        def __init__(self, **columns: Any) -> None: ...

    def __repr__(self) -> str:
        return f"<CancelRequest {self.job_id} run {self.run_no} by {self.actor}>"


class JobTimeoutBase:
    """Columns of every prefix's ``JobTimeout`` class: one job's own time limit (overrides ``Task.timeout``)."""

    __venturi_prefix__: str
    job_id: Mapped[str]
    timeout: Mapped[timedelta]

    if TYPE_CHECKING:

        def __init__(self, **columns: Any) -> None: ...

    def __repr__(self) -> str:
        return f"<JobTimeout {self.job_id} {self.timeout}>"


class OwedDeadCallBase:
    """Columns of every prefix's ``OwedDeadCall`` class: an ``on_dead`` call a worker of ``kind`` still owes."""

    __venturi_prefix__: str
    id: Mapped[int]
    job_id: Mapped[str]
    kind: Mapped[str]
    run_no: Mapped[int]
    note: Mapped[str | None]
    actor: Mapped[str]
    created_at: Mapped[datetime]
    attempts: Mapped[int]
    not_before: Mapped[datetime]
    last_error: Mapped[str | None]

    if TYPE_CHECKING:

        def __init__(self, **columns: Any) -> None: ...

    def __repr__(self) -> str:
        return f"<OwedDeadCall {self.job_id} run {self.run_no} by {self.actor}>"


class TraceContextBase:
    """Columns of every prefix's ``TraceContext`` class: the trace context a job was enqueued in."""

    __venturi_prefix__: str
    job_id: Mapped[str]
    carrier: Mapped[dict[str, str]]

    if TYPE_CHECKING:

        def __init__(self, **columns: Any) -> None: ...

    def __repr__(self) -> str:
        return f"<TraceContext {self.job_id} {self.carrier.get('traceparent')}>"


@dataclass(frozen=True)
class Models:
    """The mapped classes of one queue prefix."""

    prefix: str
    Job: type[JobBase]
    JournalEntry: type[JournalEntryBase]
    Schedule: type[ScheduleRowBase]
    Fire: type[FireRowBase]
    Pause: type[PauseBase]
    CancelRequest: type[CancelRequestBase]
    JobTimeout: type[JobTimeoutBase]
    OwedDeadCall: type[OwedDeadCallBase]
    TraceContext: type[TraceContextBase]
    ArchivedJob: type[ArchivedJobBase]

    @property
    def names(self) -> Names:
        return Names(self.prefix)

    @property
    def jobs_table(self) -> sa.Table:
        return cast(sa.Table, self.Job.__table__)  # type: ignore[attr-defined]

    @property
    def journal_table(self) -> sa.Table:
        return cast(sa.Table, self.JournalEntry.__table__)  # type: ignore[attr-defined]

    @property
    def schedules_table(self) -> sa.Table:
        return cast(sa.Table, self.Schedule.__table__)  # type: ignore[attr-defined]

    @property
    def fires_table(self) -> sa.Table:
        return cast(sa.Table, self.Fire.__table__)  # type: ignore[attr-defined]

    @property
    def pauses_table(self) -> sa.Table:
        return cast(sa.Table, self.Pause.__table__)  # type: ignore[attr-defined]

    @property
    def cancels_table(self) -> sa.Table:
        return cast(sa.Table, self.CancelRequest.__table__)  # type: ignore[attr-defined]

    @property
    def timeouts_table(self) -> sa.Table:
        return cast(sa.Table, self.JobTimeout.__table__)  # type: ignore[attr-defined]

    @property
    def on_dead_table(self) -> sa.Table:
        return cast(sa.Table, self.OwedDeadCall.__table__)  # type: ignore[attr-defined]

    @property
    def traces_table(self) -> sa.Table:
        return cast(sa.Table, self.TraceContext.__table__)  # type: ignore[attr-defined]

    @property
    def archive_table(self) -> sa.Table:
        return cast(sa.Table, self.ArchivedJob.__table__)  # type: ignore[attr-defined]

    @property
    def tables(self) -> tuple[sa.Table, ...]:
        """Every table of the queue: the two seed tables, the periodic ones, then the runtime-control ones."""
        return (self.jobs_table, self.journal_table, self.schedules_table, self.fires_table, self.pauses_table,
                self.cancels_table, self.timeouts_table, self.on_dead_table, self.traces_table,
                self.archive_table)

    @property
    def metadata(self) -> sa.MetaData:
        return self.jobs_table.metadata


_PRIVATE: dict[str, Models] = {}
_ON_BASE = "__venturi_models__"


def _private_base(metadata: sa.MetaData | None = None) -> type[DeclarativeBase]:
    """A fresh declarative base, on ``metadata`` if given (DeclarativeBase builds its registry on it)."""
    namespace: dict[str, Any] = {"metadata": metadata} if metadata is not None else {}
    return cast(type[DeclarativeBase], type("PrivateBase", (DeclarativeBase,), namespace))


def _class_name(prefix: str, name: str) -> str:
    camel = "".join(part.capitalize() for part in prefix.split("_"))
    return f"{camel}{name}_{prefix}"


def _jobs_args(n: Names) -> tuple[Any, ...]:
    pending = sa.text("status = 'pending'")
    return (
        sa.PrimaryKeyConstraint("id", name=conv(n.index("jobs_pkey"))),
        sa.CheckConstraint("priority IN (0, 1, 2)", name=conv(n.index("jobs_priority_check"))),
        sa.CheckConstraint(_in_list("status", STATUSES), name=conv(n.index("jobs_status_check"))),
        sa.Index(conv(n.index("jobs_claim")), "kind", "priority", "created_at", "visible_at",
                 postgresql_where=pending),
        sa.Index(conv(n.index("jobs_claim_priority")), "priority", "created_at", "visible_at",
                 postgresql_where=pending),
        sa.Index(conv(n.index("jobs_visible")), "kind", "visible_at", postgresql_where=pending),
        sa.Index(conv(n.index("jobs_dedup")), "kind", "dedup_key", "created_at",
                 postgresql_where=sa.text("dedup_key IS NOT NULL AND status = 'pending'")),
        sa.Index(conv(n.index("jobs_lease")), "claim_expires_at",
                 postgresql_where=sa.text("status = 'claimed'")),
        sa.Index(conv(n.index("jobs_history")), "status", "kind", "finished_at"),
        sa.Index(conv(n.index("jobs_finished")), "finished_at",
                 postgresql_where=sa.text("finished_at IS NOT NULL")),
        sa.Index(conv(n.index("jobs_created")), "created_at", "id"),
    )


def _journal_args(n: Names) -> tuple[Any, ...]:
    return (
        sa.PrimaryKeyConstraint("id", name=conv(n.index("journal_pkey"))),
        sa.ForeignKeyConstraint(["job_id"], [f"{n.jobs}.id"], ondelete="CASCADE",
                                name=conv(n.index("journal_job_id_fkey"))),
        sa.CheckConstraint(_in_list("outcome", OUTCOMES), name=conv(n.index("journal_outcome_check"))),
        sa.Index(conv(n.index("journal_job")), "job_id", "id"),
    )


def _job_columns() -> dict[str, Any]:
    tz = sa.DateTime(timezone=True)
    return {
        "id": mapped_column(sa.Text, default=new_job_id),
        "kind": mapped_column(sa.Text, nullable=False),
        "payload": mapped_column(json_column_type(), nullable=False),
        "priority": mapped_column(sa.SmallInteger, nullable=False, server_default=sa.text("1"),
                                  default=NORMAL_PRIORITY),
        "status": mapped_column(sa.Text, nullable=False, default=Status.PENDING.value),
        "created_at": mapped_column(tz, nullable=False, default=sa.func.now()),
        "visible_at": mapped_column(tz, nullable=False, default=sa.func.now()),
        "claim_expires_at": mapped_column(tz, nullable=True),
        "claimed_by": mapped_column(sa.Text, nullable=True),
        "finished_at": mapped_column(tz, nullable=True),
        "run_count": mapped_column(sa.Integer, nullable=False, server_default=sa.text("0"), default=0),
        "failure_count": mapped_column(sa.Integer, nullable=False, server_default=sa.text("0"),
                                       default=0),
        "carry": mapped_column(json_column_type(), nullable=False, server_default=JsonNullDefault()),
        "dedup_key": mapped_column(sa.Text, nullable=True),
    }


def _journal_columns() -> dict[str, Any]:
    return {
        "id": mapped_column(sa.BigInteger().with_variant(sa.Integer(), "sqlite"), sa.Identity(always=True)),
        "job_id": mapped_column(sa.Text, nullable=False),
        "kind": mapped_column(sa.Text, nullable=False),
        "run_no": mapped_column(sa.Integer, nullable=False),
        "recorded_at": mapped_column(sa.DateTime(timezone=True), nullable=False,
                                     default=sa.func.clock_timestamp()),
        "outcome": mapped_column(sa.Text, nullable=False),
        "note": mapped_column(sa.Text, nullable=True),
        "attachment": mapped_column(json_column_type(none_as_null=True), nullable=True),
    }


def _schedules_args(n: Names) -> tuple[Any, ...]:
    return (
        sa.PrimaryKeyConstraint("name", name=conv(n.index("schedules_pkey"))),
        sa.CheckConstraint("priority IN (0, 1, 2)", name=conv(n.index("schedules_priority_check"))),
        sa.CheckConstraint(_in_list("overlap", ("allow", "skip", "queue")),
                           name=conv(n.index("schedules_overlap_check"))),
        sa.Index(conv(n.index("schedules_due")), "next_at",
                 postgresql_where=sa.text("NOT paused AND removed_at IS NULL")),
    )


def _schedule_columns() -> dict[str, Any]:
    tz = sa.DateTime(timezone=True)
    return {
        "name": mapped_column(sa.Text),
        "kind": mapped_column(sa.Text, nullable=False),
        "payload": mapped_column(json_column_type(), nullable=False),
        "priority": mapped_column(sa.SmallInteger, nullable=False),
        "timing": mapped_column(sa.Text, nullable=False),
        "tz": mapped_column(sa.Text, nullable=False),
        "catch_up": mapped_column(sa.Text, nullable=False),
        "overlap": mapped_column(sa.Text, nullable=False),
        "next_at": mapped_column(tz, nullable=False),
        "last_at": mapped_column(tz, nullable=True),
        "last_job": mapped_column(sa.Text, nullable=True),
        "paused": mapped_column(sa.Boolean, nullable=False, server_default=sa.text("false"), default=False),
        "removed_at": mapped_column(tz, nullable=True),
        "fired": mapped_column(sa.BigInteger, nullable=False, server_default=sa.text("0"), default=0),
        "skipped": mapped_column(sa.BigInteger, nullable=False, server_default=sa.text("0"), default=0),
        "updated": mapped_column(tz, nullable=False, default=sa.func.now()),
    }


def _fires_args(n: Names) -> tuple[Any, ...]:
    return (
        sa.PrimaryKeyConstraint("schedule", "fire_at", name=conv(n.index("fires_pkey"))),
        sa.ForeignKeyConstraint(["schedule"], [f"{n.schedules}.name"], ondelete="CASCADE",
                                name=conv(n.index("fires_schedule_fkey"))),
        sa.Index(conv(n.index("fires_job")), "job_id"),
    )


def _fire_columns() -> dict[str, Any]:
    tz = sa.DateTime(timezone=True)
    return {
        "schedule": mapped_column(sa.Text),
        "fire_at": mapped_column(tz),
        "job_id": mapped_column(sa.Text, nullable=False),
        "fired_at": mapped_column(tz, nullable=False, default=sa.func.now()),
    }


def _pauses_args(n: Names) -> tuple[Any, ...]:
    return (
        sa.PrimaryKeyConstraint("id", name=conv(n.index("pauses_pkey"))),
        sa.Index(conv(n.index("pauses_open")), "kind", unique=True,
                 postgresql_where=sa.text("resumed_at IS NULL"), sqlite_where=sa.text("resumed_at IS NULL")),
    )


def _pauses_columns() -> dict[str, Any]:
    tz = sa.DateTime(timezone=True)
    return {
        "id": mapped_column(sa.BigInteger().with_variant(sa.Integer(), "sqlite"), sa.Identity(always=True)),
        "kind": mapped_column(sa.Text, nullable=False),
        "reason": mapped_column(sa.Text, nullable=True),
        "actor": mapped_column(sa.Text, nullable=False),
        "paused_at": mapped_column(tz, nullable=False, default=sa.func.now()),
        "resume_at": mapped_column(tz, nullable=True),
        "resumed_at": mapped_column(tz, nullable=True),
        "resumed_by": mapped_column(sa.Text, nullable=True),
    }


def _cancels_args(n: Names) -> tuple[Any, ...]:
    return (
        sa.PrimaryKeyConstraint("job_id", name=conv(n.index("cancels_pkey"))),
        sa.ForeignKeyConstraint(["job_id"], [f"{n.jobs}.id"], ondelete="CASCADE",
                                name=conv(n.index("cancels_job_id_fkey"))),
    )


def _cancels_columns() -> dict[str, Any]:
    return {
        "job_id": mapped_column(sa.Text),
        "run_no": mapped_column(sa.Integer, nullable=False),
        "actor": mapped_column(sa.Text, nullable=False),
        "note": mapped_column(sa.Text, nullable=True),
        "created_at": mapped_column(sa.DateTime(timezone=True), nullable=False, default=sa.func.now()),
    }


def _timeouts_args(n: Names) -> tuple[Any, ...]:
    return (
        sa.PrimaryKeyConstraint("job_id", name=conv(n.index("timeouts_pkey"))),
        sa.CheckConstraint("timeout > interval '0'", name=conv(n.index("timeouts_timeout_check")))
        .ddl_if(dialect="postgresql"),  # SQLite has no interval literal
        sa.ForeignKeyConstraint(["job_id"], [f"{n.jobs}.id"], ondelete="CASCADE",
                                name=conv(n.index("timeouts_job_id_fkey"))),
    )


def _timeouts_columns() -> dict[str, Any]:
    return {
        "job_id": mapped_column(sa.Text),
        "timeout": mapped_column(sa.Interval, nullable=False),
    }


def _on_dead_args(n: Names) -> tuple[Any, ...]:
    return (
        sa.PrimaryKeyConstraint("id", name=conv(n.index("on_dead_pkey"))),
        sa.ForeignKeyConstraint(["job_id"], [f"{n.jobs}.id"], ondelete="CASCADE",
                                name=conv(n.index("on_dead_job_id_fkey"))),
        sa.Index(conv(n.index("on_dead_job")), "job_id"),
    )


def _on_dead_columns() -> dict[str, Any]:
    tz = sa.DateTime(timezone=True)
    return {
        "id": mapped_column(sa.BigInteger().with_variant(sa.Integer(), "sqlite"), sa.Identity(always=True)),
        "job_id": mapped_column(sa.Text, nullable=False),
        "kind": mapped_column(sa.Text, nullable=False),
        "run_no": mapped_column(sa.Integer, nullable=False),
        "note": mapped_column(sa.Text, nullable=True),
        "actor": mapped_column(sa.Text, nullable=False),
        "created_at": mapped_column(tz, nullable=False, default=sa.func.now()),
        "attempts": mapped_column(sa.Integer, nullable=False, server_default=sa.text("0")),
        "not_before": mapped_column(tz, nullable=False, default=sa.func.now()),
        "last_error": mapped_column(sa.Text, nullable=True),
    }


def _traces_args(n: Names) -> tuple[Any, ...]:
    return (
        sa.PrimaryKeyConstraint("job_id", name=conv(n.index("traces_pkey"))),
        sa.ForeignKeyConstraint(["job_id"], [f"{n.jobs}.id"], ondelete="CASCADE",
                                name=conv(n.index("traces_job_id_fkey"))),
    )


def _traces_columns() -> dict[str, Any]:
    return {
        "job_id": mapped_column(sa.Text, nullable=False),
        "carrier": mapped_column(json_column_type(), nullable=False),
    }


def _table_class(prefix: str, base: Any, mixin: type[T], name: str, table: str, args: tuple[Any, ...],
                 namespace: dict[str, Any]) -> type[T]:
    """The mapped class ``<Prefix><name>_<prefix>`` of ``table``: ``mixin`` (its typing aid) on ``base``."""
    body = {"__tablename__": table, "__table_args__": args, "__venturi_prefix__": prefix, **namespace}
    return cast("type[T]", type(_class_name(prefix, name), (mixin, base), body))


def _foreign_metadata(base: Any) -> sa.MetaData | None:
    """The ``MetaData`` of a base that is not a SQLAlchemy declarative base (e.g. ``SQLModel``), else None."""
    if isinstance(base, type) and issubclass(base, DeclarativeBase):
        return None
    if isinstance(base, type) and isinstance(getattr(base, "registry", None), sa.orm.registry):
        return None  # a legacy declarative_base() / registry.generate_base() class
    metadata = getattr(base, "metadata", None)
    return metadata if isinstance(metadata, sa.MetaData) else None


def make_models(prefix: str, base: type[Any] | None = None, *, metadata: sa.MetaData | None = None) -> Models:
    """Return the mapped classes of ``prefix``'s tables (``Job``, ``JournalEntry`` and the feature tables).

    With ``base`` (the application's declarative base) the tables join the
    application's ``MetaData``, so its Alembic autogenerate sees them.  A
    base that is not a SQLAlchemy declarative base but has a ``MetaData``
    (``SQLModel``) or ``metadata=`` alone puts the tables into that
    ``MetaData`` through a private base, so an SQLModel project's
    ``SQLModel.metadata`` (its Alembic ``target_metadata``) holds them.
    Without either, each prefix gets a private base.  Calling again with the
    same base (or metadata) and prefix returns the same classes.  Raises
    ``BadPrefix`` (a ``ValueError``) before anything is defined if the prefix
    is invalid.
    """
    names = Names(prefix)
    if base is not None and metadata is None:
        metadata = _foreign_metadata(base)
        if metadata is not None:
            base = None
    if base is not None and metadata is not None:
        raise TypeError("make_models() takes a declarative base or metadata=, not both")
    if base is not None and not (isinstance(base, type) and hasattr(base, "registry")):
        raise TypeError(f"make_models() base must be a declarative base class (or SQLModel), got {base!r}")
    registry: dict[str, Models]
    if metadata is not None:
        registry = metadata.info.setdefault(_ON_BASE, {})
    else:
        registry = _PRIVATE if base is None else base.__dict__.get(_ON_BASE, {})
    if prefix in registry:
        return registry[prefix]
    if metadata is not None:
        base = _private_base(metadata)
    elif base is None:
        base = _private_base()
    else:
        setattr(base, _ON_BASE, registry)
    n = names
    timeout_cls = _table_class(prefix, base, JobTimeoutBase, "JobTimeout", n.timeouts, _timeouts_args(n),
                               _timeouts_columns())
    job_cls = _table_class(prefix, base, JobBase, "Job", n.jobs, _jobs_args(n), {
        **_job_columns(),
        # saved with a new job (queue.job(..., timeout=)); deleted by the database's ON DELETE CASCADE
        "time_limit": relationship(timeout_cls, uselist=False, passive_deletes=True)})
    journal_cls = _table_class(prefix, base, JournalEntryBase, "JournalEntry", n.journal, _journal_args(n),
                               {**_journal_columns(), "job": relationship(job_cls, viewonly=True)})
    schedule_cls = _table_class(prefix, base, ScheduleRowBase, "Schedule", n.schedules, _schedules_args(n),
                                _schedule_columns())
    fire_cls = _table_class(prefix, base, FireRowBase, "Fire", n.fires, _fires_args(n), _fire_columns())
    pause_cls = _table_class(prefix, base, PauseBase, "Pause", n.pauses, _pauses_args(n), _pauses_columns())
    cancel_cls = _table_class(prefix, base, CancelRequestBase, "CancelRequest", n.cancels, _cancels_args(n),
                              _cancels_columns())
    on_dead_cls = _table_class(prefix, base, OwedDeadCallBase, "OwedDeadCall", n.on_dead, _on_dead_args(n),
                               _on_dead_columns())
    trace_cls = _table_class(prefix, base, TraceContextBase, "TraceContext", n.traces, _traces_args(n),
                             _traces_columns())
    models = Models(prefix=prefix, Job=job_cls, JournalEntry=journal_cls, Schedule=schedule_cls, Fire=fire_cls,
                    Pause=pause_cls, CancelRequest=cancel_cls, JobTimeout=timeout_cls, OwedDeadCall=on_dead_cls,
                    TraceContext=trace_cls,
                    ArchivedJob=_table_class(prefix, base, ArchivedJobBase, "ArchivedJob", n.archive,
                                             archive_args(n), archive_columns()))
    registry[prefix] = models
    return models
