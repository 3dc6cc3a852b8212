"""The conformance suite: every Backend verb per driver, and the whole queue per stack.

The verb modules (``test_*_verbs.py``): two parameters multiply every test:
the ``engine`` fixture is one session-scoped engine per sync driver
(``psycopg2``, ``psycopg``), on the cluster of ``pg_url`` with the drivername
swapped, so ``models`` (migrated through that engine), ``backend`` and every
query a test makes go through that driver; the ``backend`` fixture is
parametrized by implementation (today one, ``sqlalchemy``).

The stack modules (``test_*_per_stack.py``) override ``engine`` with the
``stack`` parameter instead (see ``support/stacks.py``): {sync, async} SQLAlchemy
× {psycopg2, psycopg 3, asyncpg}, each engine made once per session.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.orm import Session
from support.drivers import CONFORMANCE_SYNC_DRIVERS, Engines, OpenRunner

from venturi_sa.storage.backend import Backend, SqlAlchemyBackend
from venturi_sa.storage.params import Runner

IMPLEMENTATIONS: dict[str, Callable[[Any], Backend]] = {"sqlalchemy": SqlAlchemyBackend}


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


@pytest.fixture(params=sorted(IMPLEMENTATIONS))
def backend(request: pytest.FixtureRequest, models: Any) -> Backend:
    """A Backend for this test's freshly migrated queue."""
    return IMPLEMENTATIONS[request.param](models)


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
