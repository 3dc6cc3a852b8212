"""The mapped ``ArchivedJob`` of ``<prefix>_archive`` (migration v9): terminal jobs moved out of ``<prefix>_jobs``.

One row per archived job: ``job`` is the job's row as JSON (``to_jsonb`` of
the ``<prefix>_jobs`` row), ``journal`` its journal rows as a JSON array in
``id`` order, ``timeout`` and ``trace`` its ``_timeouts`` and ``_traces``
rows; ``id``, ``kind``, ``status``, ``created_at`` and ``finished_at`` are
repeated as columns for the history, cleanup and stats indexes.  The table is
range-partitioned by ``moved_at`` (one partition per UTC day, attached by
:mod:`venturi_sa.storage.archive`); ``create_all`` makes the partitioned
parent only.  Read archived jobs through ``venturi_sa.ops`` (``get_job``,
``journal``, ``history``), which decode these columns into ``JobInfo``.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql
from sqlalchemy.orm import Mapped, mapped_column
from sqlalchemy.sql.elements import conv

from venturi_sa.prefix import Names


def _json() -> sa.types.TypeEngine[Any]:
    return sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


class ArchivedJobBase:
    """Columns of every prefix's ``ArchivedJob`` class (typing aid)."""

    __venturi_prefix__: str
    id: Mapped[str]
    kind: Mapped[str]
    status: Mapped[str]
    created_at: Mapped[datetime]
    finished_at: Mapped[datetime | None]
    moved_at: Mapped[datetime]
    job: Mapped[dict[str, Any]]
    journal: Mapped[list[dict[str, Any]]]
    timeout: Mapped[timedelta | None]
    trace: Mapped[dict[str, str] | None]

    if TYPE_CHECKING:

        def __init__(self, **columns: Any) -> None: ...

    def __repr__(self) -> str:
        return f"<ArchivedJob {self.id} {self.kind} {self.status} archived {self.moved_at}>"


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
        "job": mapped_column(_json(), nullable=False),
        "journal": mapped_column(_json(), nullable=False),
        "timeout": mapped_column(sa.Interval, nullable=True),
        "trace": mapped_column(_json(), nullable=True),
    }
