"""Reliability tier: a private PostgreSQL cluster per module, worker processes, side tables.

Tests here may restart or stop the cluster and terminate its backends, so
it is never the session-wide one.  Workers are real processes running
``fault_app.py``; each task execution leaves a row in ``<prefix>_side``.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterator
from typing import Any

import fault_app
import pytest
import sqlalchemy as sa
from reliability_kit import Probe, WorkerProc

from venturi_sa import Queue
from venturi_sa.devtools.throwaway import ThrowawayCluster

SETTINGS = {"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off", "max_connections": "300"}
_counter = itertools.count()


@pytest.fixture(scope="module")
def cluster() -> Iterator[ThrowawayCluster]:
    """This module's own PostgreSQL: tests may restart, stop and terminate it."""
    with ThrowawayCluster(SETTINGS) as c:
        yield c


@pytest.fixture(scope="module")
def db(cluster: ThrowawayCluster) -> Iterator[sa.Engine]:
    """The test's own engine (pre-ping: it survives server restarts)."""
    eng = sa.create_engine(cluster.url, pool_pre_ping=True, pool_size=5, max_overflow=20,
                           connect_args={"application_name": "rel-test", "options": "-c timezone=UTC"})
    yield eng
    eng.dispose()


@pytest.fixture
def rel_prefix(db: sa.Engine) -> str:
    """A fresh prefix with its queue tables migrated and its side and business tables created."""
    import alembic_venturi

    prefix = f"r{os.getpid()}_{next(_counter)}"
    alembic_venturi.upgrade(db, prefix)
    with db.begin() as conn:
        for ddl in fault_app.side_ddl(prefix):
            conn.execute(sa.text(ddl))
    return prefix


@pytest.fixture
def workers(cluster: ThrowawayCluster, rel_prefix: str) -> Iterator[Callable[..., WorkerProc]]:
    """``workers(name, **options)`` starts a fault_app process; all are killed at teardown."""
    started: list[WorkerProc] = []

    def start(name: str = "venturi-worker", **options: Any) -> WorkerProc:
        proc = WorkerProc(cluster.url, rel_prefix, name, **options)
        started.append(proc)
        return proc

    yield start
    for proc in started:
        proc.close()


@pytest.fixture
def queue(db: sa.Engine, rel_prefix: str) -> Queue:
    """The fault_app queue for this prefix (default policy), to enqueue with."""
    return fault_app.build_queue(rel_prefix, db)


@pytest.fixture
def probe(db: sa.Engine, rel_prefix: str) -> Probe:
    return Probe(db, rel_prefix)


