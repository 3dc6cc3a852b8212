"""The feature tables' constraints, indexes and columns (migrations v4 to v8).

Schedules and fires (v4), pauses and cancels (v5), per-job timeouts (v6),
owed ``on_dead`` calls (v7), trace contexts (v8); named as in
:mod:`~venturi_sa.models.job_tables`.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import mapped_column
from sqlalchemy.sql.elements import conv

from venturi_sa.models.column_types import json_column_type
from venturi_sa.models.job_tables import in_list
from venturi_sa.prefix import Names


def schedules_args(n: Names) -> tuple[Any, ...]:
    return (
        sa.PrimaryKeyConstraint("name", name=conv(n.index("schedules_pkey"))),
        sa.CheckConstraint("priority IN (0, 1, 2)", name=conv(n.index("schedules_priority_check"))),
        sa.CheckConstraint(in_list("overlap", ("allow", "skip", "queue")),
                           name=conv(n.index("schedules_overlap_check"))),
        sa.Index(conv(n.index("schedules_due")), "next_at",
                 postgresql_where=sa.text("NOT paused AND removed_at IS NULL")),
    )


def schedule_columns() -> dict[str, Any]:
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


def fires_args(n: Names) -> tuple[Any, ...]:
    return (
        sa.PrimaryKeyConstraint("schedule", "fire_at", name=conv(n.index("fires_pkey"))),
        sa.ForeignKeyConstraint(["schedule"], [f"{n.schedules}.name"], ondelete="CASCADE",
                                name=conv(n.index("fires_schedule_fkey"))),
        sa.Index(conv(n.index("fires_job")), "job_id"),
    )


def fire_columns() -> dict[str, Any]:
    tz = sa.DateTime(timezone=True)
    return {
        "schedule": mapped_column(sa.Text),
        "fire_at": mapped_column(tz),
        "job_id": mapped_column(sa.Text, nullable=False),
        "fired_at": mapped_column(tz, nullable=False, default=sa.func.now()),
    }


def pauses_args(n: Names) -> tuple[Any, ...]:
    return (
        sa.PrimaryKeyConstraint("id", name=conv(n.index("pauses_pkey"))),
        sa.Index(conv(n.index("pauses_open")), "kind", unique=True,
                 postgresql_where=sa.text("resumed_at IS NULL"), sqlite_where=sa.text("resumed_at IS NULL")),
    )


def pauses_columns() -> dict[str, Any]:
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


def cancels_args(n: Names) -> tuple[Any, ...]:
    return (
        sa.PrimaryKeyConstraint("job_id", name=conv(n.index("cancels_pkey"))),
        sa.ForeignKeyConstraint(["job_id"], [f"{n.jobs}.id"], ondelete="CASCADE",
                                name=conv(n.index("cancels_job_id_fkey"))),
    )


def cancels_columns() -> dict[str, Any]:
    return {
        "job_id": mapped_column(sa.Text),
        "run_no": mapped_column(sa.Integer, nullable=False),
        "actor": mapped_column(sa.Text, nullable=False),
        "note": mapped_column(sa.Text, nullable=True),
        "created_at": mapped_column(sa.DateTime(timezone=True), nullable=False, default=sa.func.now()),
    }


def timeouts_args(n: Names) -> tuple[Any, ...]:
    return (
        sa.PrimaryKeyConstraint("job_id", name=conv(n.index("timeouts_pkey"))),
        sa.CheckConstraint("timeout > interval '0'", name=conv(n.index("timeouts_timeout_check")))
        .ddl_if(dialect="postgresql"),  # SQLite has no interval literal
        sa.ForeignKeyConstraint(["job_id"], [f"{n.jobs}.id"], ondelete="CASCADE",
                                name=conv(n.index("timeouts_job_id_fkey"))),
    )


def timeouts_columns() -> dict[str, Any]:
    return {
        "job_id": mapped_column(sa.Text),
        "timeout": mapped_column(sa.Interval, nullable=False),
    }


def on_dead_args(n: Names) -> tuple[Any, ...]:
    return (
        sa.PrimaryKeyConstraint("id", name=conv(n.index("on_dead_pkey"))),
        sa.ForeignKeyConstraint(["job_id"], [f"{n.jobs}.id"], ondelete="CASCADE",
                                name=conv(n.index("on_dead_job_id_fkey"))),
        sa.Index(conv(n.index("on_dead_job")), "job_id"),
    )


def on_dead_columns() -> dict[str, Any]:
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


def traces_args(n: Names) -> tuple[Any, ...]:
    return (
        sa.PrimaryKeyConstraint("job_id", name=conv(n.index("traces_pkey"))),
        sa.ForeignKeyConstraint(["job_id"], [f"{n.jobs}.id"], ondelete="CASCADE",
                                name=conv(n.index("traces_job_id_fkey"))),
    )


def traces_columns() -> dict[str, Any]:
    return {
        "job_id": mapped_column(sa.Text, nullable=False),
        "carrier": mapped_column(json_column_type(), nullable=False),
    }

