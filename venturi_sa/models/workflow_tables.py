"""The dependency tables (migration v12): ``<prefix>_waits`` and ``<prefix>_parents``.

A job enqueued with ``after=[...]`` gets one ``<prefix>_parents`` row per
parent (its position in the list, the policy applied if that parent ends
dead, and whether its terminal outcome was counted) and one
``<prefix>_waits`` row (how many parents are not finished, and the time it
was asked to run at).  Both go with the dependent job (``ON DELETE
CASCADE``); ``parent_id`` has no foreign key, since a finished parent may
move to the archive.  Named as in :mod:`~venturi_sa.models.job_tables`.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any, NamedTuple

import sqlalchemy as sa
from sqlalchemy.orm import Mapped, mapped_column
from sqlalchemy.sql.elements import conv

from venturi_sa.models.job_tables import in_list
from venturi_sa.prefix import Names

POLICIES = ("cancel", "run")
"""What a dependent does when a parent ends dead: end dead too (``cancel``), or run anyway (``run``)."""


class WaitBase:
    """Columns of every prefix's ``Wait`` class: a job with parents, and how many have not ended."""

    __venturi_prefix__: str
    job_id: Mapped[str]
    remaining: Mapped[int]
    not_before: Mapped[datetime]
    killed_by: Mapped[str | None]

    if TYPE_CHECKING:

        def __init__(self, **columns: Any) -> None: ...


class ParentLinkBase:
    """Columns of every prefix's ``ParentLink`` class: ``job_id`` waits for ``parent_id``."""

    __venturi_prefix__: str
    job_id: Mapped[str]
    position: Mapped[int]
    parent_id: Mapped[str]
    policy: Mapped[str]
    done: Mapped[bool]

    if TYPE_CHECKING:

        def __init__(self, **columns: Any) -> None: ...


class WorkflowClasses(NamedTuple):
    """The mapped classes of the dependency tables of one prefix."""

    Wait: type[WaitBase]
    ParentLink: type[ParentLinkBase]

    @property
    def waits_table(self) -> sa.Table:
        return self.Wait.__table__  # type: ignore[attr-defined,no-any-return]

    @property
    def parents_table(self) -> sa.Table:
        return self.ParentLink.__table__  # type: ignore[attr-defined,no-any-return]


def waits_table_name(n: Names) -> str:
    return f"{n.prefix}_waits"


def parents_table_name(n: Names) -> str:
    return f"{n.prefix}_parents"


def _waits_args(n: Names) -> tuple[Any, ...]:
    return (
        sa.PrimaryKeyConstraint("job_id", name=conv(n.index("waits_pkey"))),
        sa.ForeignKeyConstraint(["job_id"], [f"{n.jobs}.id"], ondelete="CASCADE",
                                name=conv(n.index("waits_job_id_fkey"))),
    )


def _waits_columns() -> dict[str, Any]:
    return {
        "job_id": mapped_column(sa.Text),
        "remaining": mapped_column(sa.Integer, nullable=False),
        "not_before": mapped_column(sa.DateTime(timezone=True), nullable=False),
        "killed_by": mapped_column(sa.Text, nullable=True),
    }


def _parents_args(n: Names) -> tuple[Any, ...]:
    return (
        sa.PrimaryKeyConstraint("job_id", "position", name=conv(n.index("parents_pkey"))),
        sa.CheckConstraint(in_list("policy", POLICIES), name=conv(n.index("parents_policy_check"))),
        sa.ForeignKeyConstraint(["job_id"], [f"{n.jobs}.id"], ondelete="CASCADE",
                                name=conv(n.index("parents_job_id_fkey"))),
        sa.Index(conv(n.index("parents_parent")), "parent_id"),
    )


def _parents_columns() -> dict[str, Any]:
    return {
        "job_id": mapped_column(sa.Text),
        "position": mapped_column(sa.Integer),
        "parent_id": mapped_column(sa.Text, nullable=False),
        "policy": mapped_column(sa.Text, nullable=False),
        "done": mapped_column(sa.Boolean, nullable=False, server_default=sa.text("false"), default=False),
    }


TableClass = Callable[[type, str, str, tuple[Any, ...], dict[str, Any]], type]
"""``(mixin, class name, table name, table args, columns) -> mapped class`` (``assembly``'s builder)."""


def workflow_classes(n: Names, table_class: TableClass) -> WorkflowClasses:
    """Both mapped classes of ``n``'s prefix, built by ``table_class`` on the prefix's base."""
    return WorkflowClasses(
        Wait=table_class(WaitBase, "Wait", waits_table_name(n), _waits_args(n), _waits_columns()),
        ParentLink=table_class(ParentLinkBase, "ParentLink", parents_table_name(n), _parents_args(n),
                               _parents_columns()),
    )
