"""Times bound for comparison with the database clock."""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa


def moment(value: datetime) -> sa.ColumnElement[datetime]:
    """``value`` bound as ``timestamptz`` (compared with ``now()``, an untyped bind is sent as ``timestamp``,
    which asyncpg refuses for an aware datetime)."""
    return sa.literal(value, sa.DateTime(timezone=True))
