"""Times bound for comparison with the database clock."""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa

INFINITY: sa.ColumnElement[datetime] = sa.cast(sa.literal_column("'infinity'"), sa.DateTime(timezone=True))
"""``'infinity'::timestamptz`` as a literal (asyncpg cannot bind the text): the ``visible_at`` of a job that
waits for its parents, or for a signal with no deadline."""


def moment(value: datetime) -> sa.ColumnElement[datetime]:
    """``value`` bound as ``timestamptz`` (compared with ``now()``, an untyped bind is sent as ``timestamp``,
    which asyncpg refuses for an aware datetime)."""
    return sa.literal(value, sa.DateTime(timezone=True))
