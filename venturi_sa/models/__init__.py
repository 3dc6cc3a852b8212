"""Mapped classes for one queue prefix: ``<prefix>_jobs``, ``<prefix>_journal`` and the feature tables.

``<prefix>_schedules`` and ``<prefix>_fires`` (migration v4) hold periodic
jobs; ``<prefix>_pauses`` and ``<prefix>_cancels`` (migration v5) hold
runtime control state: paused kinds and cancel requests for running jobs;
``<prefix>_archive`` (migration v9) holds terminal jobs moved out of
``<prefix>_jobs``, partitioned by day.

The tables describe the seed DDL exactly on PostgreSQL.  The JSON columns
are ``JSON`` with a ``JSONB`` variant for PostgreSQL (and the journal id an
``INTEGER`` on SQLite), so an application whose test suite runs on SQLite
can ``Base.metadata.create_all`` with venturi's tables among its models; the
queue itself (enqueue, workers, operations) needs PostgreSQL.  Every index and constraint has an
explicit name equal to PostgreSQL's own default for that DDL, wrapped in
``conv()`` so a project's ``naming_convention`` cannot rename it; Alembic
autogenerate against a database migrated by ``alembic_venturi`` therefore
reports no differences.

The package: ``assembly`` (``make_models`` and ``Models``), ``bases`` (each
mapped class's typing aid), ``job_tables``, ``feature_tables`` and
``archive_table`` (every table's constraints, indexes and columns),
``column_types`` (JSON columns that also work on SQLite), ``job_ids``
(ULIDs).  Import from ``venturi_sa.models`` itself.
"""

from __future__ import annotations

from venturi_sa.models.assembly import Models, make_models
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
from venturi_sa.models.column_types import JsonNullDefault, json_column_type
from venturi_sa.models.job_ids import new_job_id, new_job_ids
from venturi_sa.models.job_tables import NORMAL_PRIORITY

__all__ = [
    "NORMAL_PRIORITY",
    "ArchivedJobBase",
    "CancelRequestBase",
    "FireRowBase",
    "JobBase",
    "JobTimeoutBase",
    "JournalEntryBase",
    "JsonNullDefault",
    "Models",
    "OwedDeadCallBase",
    "PauseBase",
    "ScheduleRowBase",
    "TraceContextBase",
    "json_column_type",
    "make_models",
    "new_job_id",
    "new_job_ids",
]
