"""Shared fixtures: one throwaway PostgreSQL cluster per test session.

Set ``VENTURI_TEST_URL`` to run against an existing server instead.  Every
test that needs tables gets its own queue prefix, so tests never see each
other's rows.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator

import pytest
import sqlalchemy as sa

from venturi_sa.throwaway import ThrowawayCluster

# Durability is irrelevant for tests; these make commits cheap on 2 cores.
FAST_SETTINGS = {"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off"}
_counter = itertools.count()


@pytest.fixture(scope="session")
def pg_url() -> Iterator[str]:
    """SQLAlchemy URL of a PostgreSQL database the tests may freely write to."""
    url = os.environ.get("VENTURI_TEST_URL")
    if url:
        yield url
        return
    with ThrowawayCluster(FAST_SETTINGS) as cluster:
        yield cluster.url


def make_engine(url: str, **kwargs: object) -> sa.Engine:
    """An engine with the settings every test uses (UTC session time zone)."""
    return sa.create_engine(
        url, connect_args={"options": "-c timezone=UTC"}, pool_size=20, max_overflow=40, **kwargs
    )


@pytest.fixture(scope="session")
def engine(pg_url: str) -> Iterator[sa.Engine]:
    eng = make_engine(pg_url)
    yield eng
    eng.dispose()


@pytest.fixture(scope="session")
def venturi_engine(engine: sa.Engine) -> sa.Engine:
    """The ``venturi`` pytest plugin's engine (``venturi_sa.testing``): the suite's own."""
    return engine


@pytest.fixture
def prefix() -> str:
    """A queue prefix no other test in this session uses."""
    return f"t{os.getpid()}_{next(_counter)}"


@pytest.fixture
def models(engine: sa.Engine, prefix: str):  # type: ignore[no-untyped-def]
    """Mapped classes for this test's prefix, with the tables migrated to head."""
    import alembic_venturi
    from venturi_sa import make_models

    alembic_venturi.upgrade(engine, prefix)
    return make_models(prefix)
