"""The limit tables (migration v10): limit keys, overrides and their history, the rate log, fairness turns.

Named as in :mod:`~venturi_sa.models.job_tables`; mapped for each prefix by
:func:`limit_models`, which ``make_models`` calls once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, cast

import sqlalchemy as sa
from sqlalchemy.orm import Mapped, mapped_column
from sqlalchemy.sql.elements import conv

from venturi_sa.models.job_tables import in_list
from venturi_sa.prefix import Names

LIMIT_NAMES = ("global_concurrency", "key_concurrency", "rate_limit", "key_rate_limit")
"""The limits a kind may have, as named in ``Task`` and ``queue.set_limit``."""
LIMIT_TABLES = ("limit_keys", "limits", "limit_log", "limit_starts", "limit_turns")
"""The limit tables' names after the prefix."""


class LimitKeyBase:
    """A job's limit key (no row: the key None)."""

    __venturi_prefix__: str
    job_id: Mapped[str]
    kind: Mapped[str]
    key: Mapped[str]


class LimitOverrideBase:
    """One runtime override of a kind's limit; ``value`` None means no limit."""

    __venturi_prefix__: str
    kind: Mapped[str]
    name: Mapped[str]
    value: Mapped[int | None]
    per: Mapped[timedelta | None]
    actor: Mapped[str]
    set_at: Mapped[datetime]


class LimitHistoryBase:
    """Who set or cleared which override, and when."""

    __venturi_prefix__: str
    id: Mapped[int]
    kind: Mapped[str]
    name: Mapped[str]
    action: Mapped[str]
    value: Mapped[int | None]
    per: Mapped[timedelta | None]
    actor: Mapped[str]
    at: Mapped[datetime]


class LimitStartBase:
    """One start of a rate-limited kind (``key``: its limit key, ``''`` for None)."""

    __venturi_prefix__: str
    id: Mapped[int]
    kind: Mapped[str]
    key: Mapped[str]
    at: Mapped[datetime]


class LimitTurnBase:
    """When a key (``''`` for None) of a kind was last claimed: the fair claim's order."""

    __venturi_prefix__: str
    kind: Mapped[str]
    key: Mapped[str]
    at: Mapped[datetime]


@dataclass(frozen=True)
class LimitModels:
    """The mapped limit classes of one prefix."""

    Key: type[LimitKeyBase]
    Override: type[LimitOverrideBase]
    History: type[LimitHistoryBase]
    Start: type[LimitStartBase]
    Turn: type[LimitTurnBase]

    @property
    def tables(self) -> tuple[sa.Table, ...]:
        classes: tuple[Any, ...] = (self.Key, self.Override, self.History, self.Start, self.Turn)
        return tuple(cast(sa.Table, c.__table__) for c in classes)


def _identity() -> Any:
    return mapped_column(sa.BigInteger().with_variant(sa.Integer(), "sqlite"), sa.Identity(always=True))


def _specs(n: Names) -> list[tuple[type[Any], str, str, tuple[Any, ...], dict[str, Any]]]:
    tz = sa.DateTime(timezone=True)
    p = n.prefix
    return [
        (LimitKeyBase, "LimitKey", f"{p}_limit_keys", (
            sa.PrimaryKeyConstraint("job_id", name=conv(n.index("limit_keys_pkey"))),
            sa.ForeignKeyConstraint(["job_id"], [f"{n.jobs}.id"], ondelete="CASCADE",
                                    name=conv(n.index("limit_keys_job_id_fkey"))),
        ), {"job_id": mapped_column(sa.Text), "kind": mapped_column(sa.Text, nullable=False),
            "key": mapped_column(sa.Text, nullable=False)}),
        (LimitOverrideBase, "LimitOverride", f"{p}_limits", (
            sa.PrimaryKeyConstraint("kind", "name", name=conv(n.index("limits_pkey"))),
            sa.CheckConstraint(in_list("name", LIMIT_NAMES), name=conv(n.index("limits_name_check"))),
            sa.CheckConstraint("value > 0", name=conv(n.index("limits_value_check"))),
        ), {"kind": mapped_column(sa.Text), "name": mapped_column(sa.Text),
            "value": mapped_column(sa.Integer, nullable=True), "per": mapped_column(sa.Interval, nullable=True),
            "actor": mapped_column(sa.Text, nullable=False),
            "set_at": mapped_column(tz, nullable=False, default=sa.func.now())}),
        (LimitHistoryBase, "LimitHistory", f"{p}_limit_log", (
            sa.PrimaryKeyConstraint("id", name=conv(n.index("limit_log_pkey"))),
            sa.CheckConstraint(in_list("action", ("set", "clear")),
                               name=conv(n.index("limit_log_action_check"))),
        ), {"id": _identity(), "kind": mapped_column(sa.Text, nullable=False),
            "name": mapped_column(sa.Text, nullable=False), "action": mapped_column(sa.Text, nullable=False),
            "value": mapped_column(sa.Integer, nullable=True), "per": mapped_column(sa.Interval, nullable=True),
            "actor": mapped_column(sa.Text, nullable=False),
            "at": mapped_column(tz, nullable=False, default=sa.func.now())}),
        (LimitStartBase, "LimitStart", f"{p}_limit_starts", (
            sa.PrimaryKeyConstraint("id", name=conv(n.index("limit_starts_pkey"))),
            sa.Index(conv(n.index("limit_starts_kind")), "kind", "at"),
            sa.Index(conv(n.index("limit_starts_key")), "kind", "key", "at"),
        ), {"id": _identity(), "kind": mapped_column(sa.Text, nullable=False),
            "key": mapped_column(sa.Text, nullable=False), "at": mapped_column(tz, nullable=False)}),
        (LimitTurnBase, "LimitTurn", f"{p}_limit_turns", (
            sa.PrimaryKeyConstraint("kind", "key", name=conv(n.index("limit_turns_pkey"))),
        ), {"kind": mapped_column(sa.Text), "key": mapped_column(sa.Text),
            "at": mapped_column(tz, nullable=False)}),
    ]


def limit_models(n: Names, table_class: Callable[..., Any]) -> LimitModels:
    """Map the limit tables of ``n``'s prefix with ``make_models``'s ``table_class(mixin, name, table, args, ns)``."""
    made = [table_class(mixin, name, table, args, columns) for mixin, name, table, args, columns in _specs(n)]
    return LimitModels(*made)
