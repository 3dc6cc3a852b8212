"""The claim loop's and batch writer's kept connection (``HeldConnections``): one checkout, dropped on any error."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
import sqlalchemy as sa
from sqlalchemy.exc import DBAPIError
from sqlalchemy.pool import QueuePool

from venturi_sa.worker.connections import HeldConnections, WorkerEngines


def _pid(conn: sa.Connection) -> int:
    pid = conn.exec_driver_sql("SELECT pg_backend_pid()").scalar_one()
    assert isinstance(pid, int)
    return pid


def _checked_out(engine: sa.Engine) -> int:
    pool = engine.pool
    assert isinstance(pool, QueuePool)
    return pool.checkedout()


@pytest.fixture
def repeatable(pg_url: str) -> Iterator[sa.Engine]:
    engine = sa.create_engine(pg_url, isolation_level="REPEATABLE READ", pool_size=2, max_overflow=0)
    yield engine
    engine.dispose()


def test_transactions_share_one_checkout_at_the_given_isolation(repeatable: sa.Engine) -> None:
    engines = WorkerEngines(repeatable, sync_engine=None, async_engine=None, pool_size=2)
    held = engines.held(isolation_level="READ COMMITTED")
    assert isinstance(held, HeldConnections)
    level = "SHOW transaction_isolation"
    first = held.begin(lambda c: (_pid(c), c.exec_driver_sql(level).scalar_one()))
    assert _checked_out(repeatable) == 1  # kept between transactions
    second = held.connect(lambda c: (_pid(c), c.exec_driver_sql(level).scalar_one()))
    assert first == second == (first[0], "read committed")
    held.close()
    assert _checked_out(repeatable) == 0
    assert held.begin(_pid) > 0  # a closed runner checks out again


def test_an_error_rolls_back_and_drops_the_connection(pg_url: str) -> None:
    own = sa.create_engine(pg_url, pool_size=1, max_overflow=0)
    try:
        held = HeldConnections(own)
        held.begin(lambda c: c.exec_driver_sql("CREATE TEMP TABLE held_probe (n int)"))

        def fails(conn: sa.Connection) -> None:
            conn.exec_driver_sql("INSERT INTO held_probe VALUES (1)")
            raise RuntimeError("boom")

        with pytest.raises(RuntimeError):
            held.begin(fails)
        assert _checked_out(own) == 0
        held.close()
    finally:
        own.dispose()


def test_a_kept_connection_found_dead_is_replaced_as_the_pool_would(engine: sa.Engine) -> None:
    """Its backend terminated while it sat idle: the next transaction runs on a new connection, no error.

    The pool pings what it checks out (pool_pre_ping); a kept connection is not
    checked out again, so without this the claim loop's first claim after a
    server restart failed and stopped claiming until the lease keeper's next probe.
    """
    held = HeldConnections(engine)
    before = held.begin(_pid)
    with engine.connect() as other:
        other.exec_driver_sql(f"SELECT pg_terminate_backend({int(before)})")
    after = held.begin(_pid)
    assert after != before
    with engine.connect() as other:
        other.exec_driver_sql(f"SELECT pg_terminate_backend({int(after)})")
    assert held.connect(_pid) not in (before, after)
    held.close()


def test_a_failing_statement_on_a_live_connection_is_not_run_again(engine: sa.Engine) -> None:
    held = HeldConnections(engine)
    held.begin(_pid)
    calls: list[int] = []

    def fails(conn: sa.Connection) -> None:
        calls.append(1)
        conn.exec_driver_sql("SELECT 1/0")

    with pytest.raises(DBAPIError):
        held.begin(fails)
    assert calls == [1]
    held.close()


def test_close_during_a_transaction_returns_the_connection_when_it_ends(pg_url: str) -> None:
    own = sa.create_engine(pg_url, pool_size=1, max_overflow=0)
    inside, leave = threading.Event(), threading.Event()

    def slow(conn: sa.Connection) -> int:
        inside.set()
        assert leave.wait(30)
        return _pid(conn)

    try:
        held = HeldConnections(own)
        results: list[int] = []
        thread = threading.Thread(target=lambda: results.append(held.begin(slow)))
        thread.start()
        assert inside.wait(30)
        held.close()
        assert _checked_out(own) == 1  # still in use
        leave.set()
        thread.join(30)
        assert results and _checked_out(own) == 0
    finally:
        own.dispose()
