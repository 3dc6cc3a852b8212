"""Helpers for the async tests: async engines on each async driver, derived from the test cluster URL.

Tests stay plain sync functions that call ``asyncio.run(...)`` (no asyncio
plugin).  Each ``asyncio.run`` has its own loop, and an asyncpg connection
belongs to the loop that opened it, so these engines do not pool
(``NullPool``): nothing is carried from one loop to the next.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlalchemy.pool import NullPool

ASYNC_DRIVERS = ("asyncpg", "psycopg_async")
_MODULES = {"asyncpg": "asyncpg", "psycopg_async": "psycopg"}


def async_url(pg_url: str, driver: str) -> sa.URL:
    return sa.make_url(pg_url).set(drivername=f"postgresql+{driver}")


def make_async_engine(pg_url: str, driver: str, **kwargs: object) -> AsyncEngine:
    """An AsyncEngine on ``driver``; the test is skipped (saying which extra) if the driver is missing."""
    pytest.importorskip("greenlet", reason="SQLAlchemy's asyncio support needs greenlet")
    pytest.importorskip(_MODULES[driver], reason=f"async driver {driver} not installed "
                                                 "(pip install 'venturi[psycopg]' / 'venturi[asyncpg]')")
    kwargs.setdefault("poolclass", NullPool)
    return create_async_engine(async_url(pg_url, driver), **kwargs)


@pytest.fixture(name="async_engine", params=ASYNC_DRIVERS)
def async_engine_fixture(request: pytest.FixtureRequest, pg_url: str) -> Iterator[AsyncEngine]:
    """An AsyncEngine on each async driver in turn (no pool: safe across ``asyncio.run`` calls)."""
    engine = make_async_engine(pg_url, request.param)
    yield engine
    engine.sync_engine.dispose()
