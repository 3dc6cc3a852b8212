"""The dashboard behind a lock on the jobs table: 503 "busy" within its query timeout, and the pool survives.

Another connection holds ``LOCK TABLE <prefix>_jobs IN ACCESS EXCLUSIVE MODE``
(what a migration or ``VACUUM FULL`` takes) while pages are asked for; every
request runs in a thread joined with a deadline, and the lock is always let go,
so a request that hangs fails the test instead of hanging it.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
import sqlalchemy as sa
from starlette.testclient import TestClient
from support.probes import jobs_locked
from support.web import seed

from venturi_sa.web import create_app

DEFAULT_SECONDS = 5.0
"""create_app's default query timeout, as docs/dashboard.md promises it."""

TIMEOUT = 1.0
"""The dashboard's query timeout in these tests (seconds)."""
MARGIN = 4.0
"""How long past the timeout an answer may take on a loaded 2-core machine."""


def _timed(client: TestClient, path: str, results: list[Any]) -> None:
    started = time.monotonic()
    response = client.get(path)
    results.append((response, time.monotonic() - started))


def _ask_all(client: TestClient, paths: list[str], deadline: float) -> tuple[list[Any], list[threading.Thread]]:
    results: list[Any] = []
    threads = [threading.Thread(target=_timed, args=(client, p, results), daemon=True) for p in paths]
    for thread in threads:
        thread.start()
    end = time.monotonic() + deadline
    for thread in threads:
        thread.join(max(0.0, end - time.monotonic()))
    return results, [t for t in threads if t.is_alive()]


@pytest.mark.timeout(90)
def test_a_page_behind_a_table_lock_answers_busy_within_the_timeout(engine: sa.Engine, models: Any) -> None:
    seed(engine, models)
    app = create_app(engine, models.prefix, listen=False)  # the default bound: 5 s
    with TestClient(app) as client:
        with jobs_locked(engine, models.prefix):
            results, hung = _ask_all(client, ["/", "/jobs"], DEFAULT_SECONDS + MARGIN)
            assert not hung, "a page still waited behind the lock after its query timeout"
        for response, took in results:
            assert response.status_code == 503, response.text[:300]
            assert response.headers["Retry-After"] == "5"
            assert 'id="busy"' in response.text and "busy" in response.text
            assert took < DEFAULT_SECONDS + MARGIN
        assert client.get("/").status_code == 200  # the lock is gone: the page answers
    app.state.dashboard.feed.close()


@pytest.mark.timeout(120)
def test_many_waiting_requests_do_not_exhaust_the_pool(pg_url: str, engine: sa.Engine, models: Any) -> None:
    small = sa.create_engine(pg_url, connect_args={"options": "-c timezone=UTC"}, pool_size=3, max_overflow=0,
                             pool_timeout=60)
    app = create_app(small, models.prefix, listen=False, query_timeout=TIMEOUT)
    try:
        with TestClient(app) as client:
            with jobs_locked(engine, models.prefix):
                # 20 requests behind the lock share the dashboard's 3 connections
                results, hung = _ask_all(client, ["/"] * 20, 20 * (TIMEOUT + MARGIN) / 2)
                assert not hung, f"{len(hung)} requests still waiting behind the lock"
                assert {r.status_code for r, _ in results} == {503}
            assert small.pool.checkedout() == 0
            assert client.get("/schedules").status_code == 200
            assert client.get("/").status_code == 200
    finally:
        app.state.dashboard.feed.close()
        small.dispose()


def test_the_bound_ends_with_the_transaction(engine: sa.Engine, models: Any) -> None:
    app = create_app(engine, models.prefix, listen=False, query_timeout=2.5)
    bounded_engine = app.state.dashboard.engine
    with bounded_engine.connect() as conn:
        assert conn.exec_driver_sql("SHOW lock_timeout").scalar() == "2500ms"
        assert conn.exec_driver_sql("SHOW statement_timeout").scalar() == "2500ms"
        conn.rollback()
        raw = conn.connection.dbapi_connection
        assert raw is not None
        cursor = raw.cursor()
        cursor.execute("SHOW lock_timeout")  # outside venturi's transaction: the server's default
        assert cursor.fetchone()[0] == "0"
        raw.rollback()
    with engine.connect() as conn:  # the application's engine is never bounded
        assert conn.exec_driver_sql("SHOW lock_timeout").scalar() == "0"
    app.state.dashboard.feed.close()
