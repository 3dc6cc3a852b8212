"""``'infinity'`` timestamps read through psycopg 3: ``datetime.max`` (UTC), as psycopg2 and asyncpg read them.

A job waiting for its parents has ``visible_at = 'infinity'``.  psycopg 3's
own ``timestamptz`` loaders raise ``DataError`` on it, so any read of such a
row (``get_job``, a refreshed ``Job``, the dashboard) would fail on that
driver.  :func:`register` adds loaders to psycopg's global adapters that
return ``datetime.max`` (``datetime.min`` for ``'-infinity'``) with UTC and
leave every other value to psycopg's own loaders.  Connections opened
afterwards use them; venturi calls it when imported, so an engine created
after ``import venturi_sa`` reads waiting jobs.  Without psycopg 3 it does nothing.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

_MAX = datetime.max.replace(tzinfo=timezone.utc)
_MIN = datetime.min.replace(tzinfo=timezone.utc)
_BINARY_MAX = (2**63 - 1).to_bytes(8, "big", signed=True)
_BINARY_MIN = (-(2**63)).to_bytes(8, "big", signed=True)
_done: list[bool] = []


def register() -> None:
    """Install the infinity-aware ``timestamptz`` loaders on ``psycopg.adapters`` (once)."""
    if _done:
        return
    try:
        import psycopg
        from psycopg.types.datetime import TimestamptzBinaryLoader, TimestamptzLoader
    except ImportError:  # psycopg 3 is not installed: nothing to do
        return

    class InfinityLoader(TimestamptzLoader):
        def load(self, data: Any) -> datetime:
            raw = bytes(data)
            if raw == b"infinity":
                return _MAX
            if raw == b"-infinity":
                return _MIN
            return super().load(data)

    class InfinityBinaryLoader(TimestamptzBinaryLoader):
        def load(self, data: Any) -> datetime:
            raw = bytes(data)
            if raw == _BINARY_MAX:
                return _MAX
            if raw == _BINARY_MIN:
                return _MIN
            return super().load(data)

    psycopg.adapters.register_loader("timestamptz", InfinityLoader)
    psycopg.adapters.register_loader("timestamptz", InfinityBinaryLoader)
    _done.append(True)
