"""``'infinity'`` timestamps: ``datetime.max`` (UTC) through psycopg 3 as through psycopg2; asyncpg: :func:`aware`.

A job waiting for its parents, or for a signal with no deadline, has
``visible_at = 'infinity'``.  psycopg 3's own ``timestamptz`` loaders raise
``DataError`` on it, so any read of such a row (``get_job``, a refreshed
``Job``, the dashboard, a drain) would fail on that driver.

The loaders are installed on each connection's own adapters, not on
``psycopg.adapters``: SQLAlchemy copies the global adapters into an engine
when the engine is created, so a global registration made when venturi is
imported never reaches an engine created before (a FastAPI project's
``app/core/db.py``).  :func:`register` (called when venturi is imported)
adds a ``checkout`` listener to every SQLAlchemy connection pool, existing
and future; the first time a psycopg 3 connection (sync or async) is checked
out, :func:`install` registers the loaders on that connection, whatever the
engine and whenever it was created.  The loaders return ``datetime.max``
(``datetime.min`` for ``'-infinity'``) with UTC and leave every other value to
psycopg's own loaders.  Other drivers' connections are left alone; without
psycopg 3 nothing is installed.
"""

from __future__ import annotations

import functools
import sys
from datetime import datetime, timezone
from typing import Any

from sqlalchemy import event
from sqlalchemy.pool import ConnectionPoolEntry, Pool

_MAX = datetime.max.replace(tzinfo=timezone.utc)
_MIN = datetime.min.replace(tzinfo=timezone.utc)
_BINARY_MAX = (2**63 - 1).to_bytes(8, "big", signed=True)
_BINARY_MIN = (-(2**63)).to_bytes(8, "big", signed=True)
_INSTALLED = "venturi_infinite_times"  # key in a pool entry's ``info``, which lives as long as its DBAPI connection
_done: list[bool] = []


def aware(value: datetime) -> datetime:
    """``value``, with UTC if it is a naive ``datetime.max`` or ``datetime.min``.

    asyncpg reads a ``timestamptz`` ``'infinity'`` as a naive ``datetime.max``,
    which cannot be compared with an aware time; every other value is
    returned as it is.
    """
    if value.tzinfo is None and value in (datetime.max, datetime.min):
        return value.replace(tzinfo=timezone.utc)
    return value


def register() -> None:
    """Listen to every SQLAlchemy pool's ``checkout`` (once per process): see the module docstring."""
    if _done:
        return
    event.listen(Pool, "checkout", _checked_out)
    _done.append(True)


def _checked_out(dbapi_connection: Any, entry: ConnectionPoolEntry, proxy: Any) -> None:
    """A pool's ``checkout`` event: :func:`install` on a connection checked out for the first time."""
    if _INSTALLED in entry.info:
        return
    install(entry.driver_connection)
    entry.info[_INSTALLED] = True


def install(driver_connection: Any) -> None:
    """Register the infinity-aware loaders on ``driver_connection``'s own adapters if it is a psycopg 3 one.

    Only that connection (and the cursors it opens afterwards) is changed;
    anything else (psycopg2, asyncpg, None) is left alone.
    """
    psycopg = sys.modules.get("psycopg")  # a psycopg 3 connection exists only if psycopg was imported
    if psycopg is None or not isinstance(driver_connection, psycopg.BaseConnection):
        return
    adapters = driver_connection.adapters
    for loader in _loader_classes():
        adapters.register_loader("timestamptz", loader)


@functools.cache
def _loader_classes() -> tuple[type, ...]:
    """The text and binary loaders, made once (psycopg is imported by then)."""
    from psycopg.types.datetime import TimestamptzBinaryLoader, TimestamptzLoader

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

    return InfinityLoader, InfinityBinaryLoader
