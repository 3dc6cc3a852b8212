"""The two seed tables' constraints, indexes and columns: ``<prefix>_jobs`` and ``<prefix>_journal``.

Every constraint and index is named as PostgreSQL names it by default,
wrapped in ``conv()`` so an application's ``naming_convention`` cannot rename it.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import mapped_column
from sqlalchemy.sql.elements import conv

from venturi_sa.models.column_types import JsonNullDefault, json_column_type
from venturi_sa.models.job_ids import new_job_id
from venturi_sa.prefix import Names
from venturi_sa.states import OUTCOMES, STATUSES, Status

NORMAL_PRIORITY = 1


def in_list(column: str, values: tuple[str, ...]) -> str:
    """The CHECK constraint text ``column IN ('a', 'b')`` of venturi's own constant ``values``."""
    quoted = ", ".join(f"'{value}'" for value in values)
    return f"{column} IN ({quoted})"


def jobs_args(n: Names) -> tuple[Any, ...]:
    pending = sa.text("status = 'pending'")
    return (
        sa.PrimaryKeyConstraint("id", name=conv(n.index("jobs_pkey"))),
        sa.CheckConstraint("priority IN (0, 1, 2)", name=conv(n.index("jobs_priority_check"))),
        sa.CheckConstraint(in_list("status", STATUSES), name=conv(n.index("jobs_status_check"))),
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


def journal_args(n: Names) -> tuple[Any, ...]:
    return (
        sa.PrimaryKeyConstraint("id", name=conv(n.index("journal_pkey"))),
        sa.ForeignKeyConstraint(["job_id"], [f"{n.jobs}.id"], ondelete="CASCADE",
                                name=conv(n.index("journal_job_id_fkey"))),
        sa.CheckConstraint(in_list("outcome", OUTCOMES), name=conv(n.index("journal_outcome_check"))),
        sa.Index(conv(n.index("journal_job")), "job_id", "id"),
    )


def job_columns() -> dict[str, Any]:
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


def journal_columns() -> dict[str, Any]:
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

