"""The storage conformance suite: every Backend verb, against a real PostgreSQL, per driver.

Two parameters multiply every test here: the ``engine`` fixture is one
session-scoped engine per sync driver (``psycopg2``, ``psycopg``), on the
cluster of ``pg_url`` with the drivername swapped, so ``models`` (migrated
through that engine), ``backend`` and every query a test makes go through
that driver; the ``backend`` fixture is parametrized by implementation
(today one, ``sqlalchemy``).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from driver_kit import SYNC_DRIVERS, driver_engine

from venturi_sa.storage.backend import Backend, SqlAlchemyBackend

# The worker-level conformance tests reuse the integration tier's helpers (queue_kit).
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))

IMPLEMENTATIONS: dict[str, Callable[[Any], Backend]] = {"sqlalchemy": SqlAlchemyBackend}


@pytest.fixture(scope="session", params=SYNC_DRIVERS)
def engine(request: pytest.FixtureRequest, pg_url: str) -> Iterator[sa.Engine]:
    """The test cluster through one sync driver (overrides the root ``engine``)."""
    eng = driver_engine(pg_url, request.param)
    yield eng
    eng.dispose()


@pytest.fixture(params=sorted(IMPLEMENTATIONS))
def backend(request: pytest.FixtureRequest, models: Any) -> Backend:
    """A Backend for this test's freshly migrated queue."""
    return IMPLEMENTATIONS[request.param](models)
