"""``make_models``: one prefix's mapped classes, built once per base (or metadata) and prefix."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeVar, cast

import sqlalchemy as sa
from sqlalchemy.orm import DeclarativeBase, relationship

from venturi_sa.models import feature_tables as ft
from venturi_sa.models.archive_table import archive_args, archive_columns
from venturi_sa.models.bases import (
    ArchivedJobBase,
    CancelRequestBase,
    FireRowBase,
    JobBase,
    JobTimeoutBase,
    JournalEntryBase,
    OwedDeadCallBase,
    PauseBase,
    ScheduleRowBase,
    TraceContextBase,
)
from venturi_sa.models.job_tables import job_columns, jobs_args, journal_args, journal_columns
from venturi_sa.models.limit_tables import LimitModels, limit_models
from venturi_sa.models.step_tables import SignalBase, StepBase, step_classes
from venturi_sa.models.throttle_tables import ThrottleStartBase, throttles_args, throttles_columns, throttles_name
from venturi_sa.models.workflow_tables import WorkflowClasses, workflow_classes
from venturi_sa.prefix import Names

T = TypeVar("T")


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
    Limits: LimitModels
    ThrottleStart: type[ThrottleStartBase]  # v11
    workflow: WorkflowClasses  # the dependency tables (v12)
    Step: type[StepBase]
    Signal: type[SignalBase]

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
    def throttles_table(self) -> sa.Table:
        return cast(sa.Table, self.ThrottleStart.__table__)  # type: ignore[attr-defined]

    @property
    def steps_table(self) -> sa.Table:
        return cast(sa.Table, self.Step.__table__)  # type: ignore[attr-defined]

    @property
    def signals_table(self) -> sa.Table:
        return cast(sa.Table, self.Signal.__table__)  # type: ignore[attr-defined]

    @property
    def tables(self) -> tuple[sa.Table, ...]:
        """Every table of the queue: the two seed tables, the periodic ones, the runtime-control ones, the archive."""
        return (self.jobs_table, self.journal_table, self.schedules_table, self.fires_table, self.pauses_table,
                self.cancels_table, self.timeouts_table, self.on_dead_table, self.traces_table,
                self.archive_table, *self.Limits.tables, self.throttles_table, self.workflow.waits_table,
                self.workflow.parents_table, self.steps_table, self.signals_table)

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
    timeout_cls = _table_class(prefix, base, JobTimeoutBase, "JobTimeout", n.timeouts, ft.timeouts_args(n),
                               ft.timeouts_columns())
    job_cls = _table_class(prefix, base, JobBase, "Job", n.jobs, jobs_args(n), {
        **job_columns(),
        # saved with a new job (queue.job(..., timeout=)); deleted by the database's ON DELETE CASCADE
        "time_limit": relationship(timeout_cls, uselist=False, passive_deletes=True)})
    journal_cls = _table_class(prefix, base, JournalEntryBase, "JournalEntry", n.journal, journal_args(n),
                               {**journal_columns(), "job": relationship(job_cls, viewonly=True)})
    schedule_cls = _table_class(prefix, base, ScheduleRowBase, "Schedule", n.schedules, ft.schedules_args(n),
                                ft.schedule_columns())
    fire_cls = _table_class(prefix, base, FireRowBase, "Fire", n.fires, ft.fires_args(n), ft.fire_columns())
    pause_cls = _table_class(prefix, base, PauseBase, "Pause", n.pauses, ft.pauses_args(n), ft.pauses_columns())
    cancel_cls = _table_class(prefix, base, CancelRequestBase, "CancelRequest", n.cancels, ft.cancels_args(n),
                              ft.cancels_columns())
    on_dead_cls = _table_class(prefix, base, OwedDeadCallBase, "OwedDeadCall", n.on_dead, ft.on_dead_args(n),
                               ft.on_dead_columns())
    trace_cls = _table_class(prefix, base, TraceContextBase, "TraceContext", n.traces, ft.traces_args(n),
                             ft.traces_columns())
    archive_cls = _table_class(prefix, base, ArchivedJobBase, "ArchivedJob", n.archive, archive_args(n),
                               archive_columns())
    models = Models(prefix=prefix, Job=job_cls, JournalEntry=journal_cls, Schedule=schedule_cls, Fire=fire_cls,
                    Pause=pause_cls, CancelRequest=cancel_cls, JobTimeout=timeout_cls, OwedDeadCall=on_dead_cls,
                    TraceContext=trace_cls, ArchivedJob=archive_cls, ThrottleStart=_table_class(
                        prefix, base, ThrottleStartBase, "ThrottleStart", throttles_name(n), throttles_args(n),
                        throttles_columns()),
                    **step_classes(prefix, base, _table_class),
                    workflow=workflow_classes(n, lambda *table: _table_class(prefix, base, *table)),
                    Limits=limit_models(n, lambda *spec: _table_class(prefix, base, *spec)))
    registry[prefix] = models
    return models
