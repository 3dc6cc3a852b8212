"""The conformance suite: the Backend seam per implementation, the storage topics per driver, the queue per stack.

The worker's verbs (``test_worker_verbs.py``, the :class:`~venturi_sa.storage.backend.Backend`
seam) run once per implementation through the ``kit`` fixture
(``support/backends.py``): ``sqlalchemy-<driver>`` per sync driver (``psycopg2``,
``psycopg``; psycopg2 only under ``VENTURI_DRIVER_MATRIX=lean``) and
``memory`` (:class:`~venturi_sa.storage.memory.MemoryBackend`, no database).

The other verb modules (enqueue, operations, control, the dashboard: their
topic modules of ``venturi_sa.storage``, PostgreSQL only): the ``engine``
fixture is one session-scoped engine per sync driver, on the cluster of
``pg_url`` with the drivername swapped, so ``models`` (migrated through that
engine) and every query a test makes go through that driver.

The stack modules (``test_*_per_stack.py``) override ``engine`` with the
``stack`` parameter instead (see ``support/stacks.py``): {sync, async} SQLAlchemy
× {psycopg2, psycopg 3, asyncpg}, each engine made once per session.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import sqlalchemy as sa
from sqlalchemy.orm import Session
from support.backends import Kit, MemoryKit, SqlKit
from support.drivers import CONFORMANCE_SYNC_DRIVERS, Engines, OpenRunner

import alembic_venturi
from venturi_sa import make_models
from venturi_sa.storage.params import Runner

KITS = (*(f"sqlalchemy-{driver}" for driver in CONFORMANCE_SYNC_DRIVERS), "memory")


@pytest.fixture(scope="session")
def engines(pg_url: str) -> Iterator[Engines]:
    """The test cluster through each driver and flavour, every engine made once (on first use)."""
    made = Engines(pg_url)
    yield made
    made.dispose()


@pytest.fixture(scope="session", params=CONFORMANCE_SYNC_DRIVERS)
def engine(request: pytest.FixtureRequest, engines: Engines) -> sa.Engine:
    """The test cluster through one sync driver (overrides the root ``engine``)."""
    return engines.sync(request.param)


@pytest.fixture(params=KITS)
def kit(request: pytest.FixtureRequest, prefix: str) -> Kit:
    """One Backend implementation and its harness: a freshly migrated queue per driver, or a memory store."""
    if request.param == "memory":
        return MemoryKit()
    engines: Engines = request.getfixturevalue("engines")
    engine = engines.sync(request.param.removeprefix("sqlalchemy-"))
    alembic_venturi.upgrade(engine, prefix)
    return SqlKit(engine, make_models(prefix))


@pytest.fixture(params=["session", "connection"])
def runner(request: pytest.FixtureRequest, engine: sa.Engine) -> OpenRunner:
    """Opens a runner of one kind in its own transaction: committed on exit, rolled back on error."""

    @contextmanager
    def open_session() -> Iterator[Runner]:
        with Session(engine) as session, session.begin():
            yield session

    @contextmanager
    def open_connection() -> Iterator[Runner]:
        with engine.begin() as conn:
            yield conn

    return open_session if request.param == "session" else open_connection
