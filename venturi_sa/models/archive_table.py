"""The archive's constraints, indexes, partitioning and columns: ``<prefix>_archive`` (migration v9).

Terminal jobs moved out of ``<prefix>_jobs``, one row per archived job:
``job`` is the job's row as JSON (``to_jsonb`` of the ``<prefix>_jobs`` row; a
dependent's ``<prefix>_parents`` and ``<prefix>_waits`` rows under the keys
``after`` and ``waits``, which no jobs column is named),
``journal`` its journal rows as a JSON array in ``id`` order, ``timeout``
and ``trace`` its ``_timeouts`` and ``_traces`` rows, ``steps`` and
``signals`` (migration v14) its ``_steps`` and ``_signals`` rows as JSON
arrays (NULL: none), ``limit_key`` its ``_limit_keys`` key (v14); ``id``, ``kind``,
``status``, ``created_at`` and ``finished_at`` are repeated as columns for
the history, cleanup and stats indexes.  The table is range-partitioned by
``moved_at`` (one partition per UTC day, attached by
:mod:`venturi_sa.storage.archive`); ``create_all`` makes the partitioned
parent only.  Read archived jobs through the queue's operations
(``get_job``, ``journal``, ``history``), which decode these columns into
``JobInfo``.  The mapped class's typing aid is
:class:`~venturi_sa.models.bases.ArchivedJobBase`.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import mapped_column
from sqlalchemy.sql.elements import conv

from venturi_sa.models.column_types import json_column_type
from venturi_sa.prefix import Names


def archive_args(n: Names) -> tuple[Any, ...]:
    """Constraints, indexes and the partitioning of ``<prefix>_archive``, named as the v9 body names them."""
    return (
        sa.PrimaryKeyConstraint("id", "moved_at", name=conv(n.index("archive_pkey"))),
        sa.CheckConstraint("status IN ('completed', 'dead')", name=conv(n.index("archive_status_check"))),
        sa.Index(conv(n.index("archive_created")), "created_at", "id"),
        sa.Index(conv(n.index("archive_history")), "status", "kind", "finished_at"),
        sa.Index(conv(n.index("archive_finished")), "finished_at"),
        {"postgresql_partition_by": "RANGE (moved_at)"},
    )


def archive_columns() -> dict[str, Any]:
    tz = sa.DateTime(timezone=True)
    return {
        "id": mapped_column(sa.Text, nullable=False),
        "kind": mapped_column(sa.Text, nullable=False),
        "status": mapped_column(sa.Text, nullable=False),
        "created_at": mapped_column(tz, nullable=False),
        "finished_at": mapped_column(tz, nullable=True),
        "moved_at": mapped_column(tz, nullable=False),
        "job": mapped_column(json_column_type(), nullable=False),
        "journal": mapped_column(json_column_type(), nullable=False),
        "timeout": mapped_column(sa.Interval, nullable=True),
        "trace": mapped_column(json_column_type(), nullable=True),
        "steps": mapped_column(json_column_type(), nullable=True),  # v14
        "signals": mapped_column(json_column_type(), nullable=True),  # v14
        "limit_key": mapped_column(sa.Text, nullable=True),  # v14
    }
