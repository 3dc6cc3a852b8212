"""LISTEN on every driver: wake-ups, a terminated listener backend, the async adapters.

Sync drivers run a real Worker; the async adapters (asyncpg, psycopg async)
run :class:`~venturi_sa.worker.listener.AsyncListener` on an event loop of
their own.  A lost connection is made with ``pg_terminate_backend`` on the
listener's own server process.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa
from driver_kit import SYNC_DRIVERS, driver_engine, driver_url
from queue_kit import Events, enqueue, running, wait_until
from sqlalchemy.ext.asyncio import create_async_engine

from venturi_sa import Queue, Task, Worker
from venturi_sa.storage import drivers
from venturi_sa.worker.listener import AsyncListener

LOST, RESTORED = "LISTEN connection lost", "LISTEN connection restored"


class Ping(Task):
    KIND = "ping"


@pytest.fixture(params=SYNC_DRIVERS)
def driver_engine_(request: pytest.FixtureRequest, pg_url: str) -> Iterator[sa.Engine]:
    eng = driver_engine(pg_url, request.param)
    yield eng
    eng.dispose()


def terminate(engine: sa.Engine, pid: int) -> None:
    with engine.connect() as conn:
        assert conn.execute(sa.select(sa.func.pg_terminate_backend(pid))).scalar_one()
        conn.commit()


def messages(caplog: pytest.LogCaptureFixture, text: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if text in r.getMessage()]


def woken(engine: sa.Engine, queue: Queue, events: Events) -> float:
    """Enqueue one job into an idle worker; seconds until it finished."""
    mark = events.mark()
    start = time.monotonic()
    [job_id] = enqueue(engine, queue, Ping())
    at, _ = events.wait_for("finished", after=mark, timeout=5, job_id=job_id)
    events.wait_for("idle", after=mark)
    return at - start


def test_the_adapter_hears_committed_notifications_only(driver_engine_: sa.Engine) -> None:
    listening = drivers.listen(driver_engine_, ["venturi_t_adapter"])
    try:
        assert listening.wait(0.05) == []
        with driver_engine_.connect() as conn:
            conn.execute(drivers.notify_statement("venturi_t_adapter", "rolled back"))
            conn.rollback()
            conn.execute(drivers.notify_statement("venturi_t_adapter", "one"))
            conn.commit()
        got: list[drivers.Notification] = []
        wait_until(lambda: got.extend(listening.wait(0.5)) or got, what="the notification")
        assert got == [drivers.Notification("venturi_t_adapter", "one")]
    finally:
        listening.close()


def test_the_adapter_reports_a_lost_connection(driver_engine_: sa.Engine, engine: sa.Engine) -> None:
    listening = drivers.listen(driver_engine_, ["venturi_t_lost"])
    try:
        terminate(engine, listening.backend_pid)
        with pytest.raises(drivers.ListenConnectionLost):
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                listening.wait(0.5)
    finally:
        listening.close()


def test_an_idle_worker_wakes_within_2s_every_time(driver_engine_: sa.Engine, models: Any,
                                                   caplog: pytest.LogCaptureFixture) -> None:
    queue = Queue(models, [Ping])
    events = Events()
    worker = Worker(queue, driver_engine_, poll_interval=30, on_event=events)
    with caplog.at_level(logging.DEBUG, logger="venturi_sa"), running(worker):
        events.wait_for("idle")
        assert worker.listener is not None and worker.listener.connected.wait(20)
        latencies = [woken(driver_engine_, queue, events) for _ in range(5)]
    assert max(latencies) < 2.0, latencies
    assert not messages(caplog, "LISTEN"), messages(caplog, "LISTEN")


def test_a_terminated_listener_reconnects_once_and_still_wakes(driver_engine_: sa.Engine, engine: sa.Engine,
                                                              models: Any, caplog: pytest.LogCaptureFixture) -> None:
    queue = Queue(models, [Ping])
    events = Events()
    worker = Worker(queue, driver_engine_, poll_interval=30, on_event=events)
    with caplog.at_level(logging.INFO, logger="venturi_sa"), running(worker):
        events.wait_for("idle")
        listener = worker.listener
        assert listener is not None and listener.connected.wait(20)
        old = listener.backend_pid
        assert old is not None
        terminate(engine, old)
        wait_until(lambda: messages(caplog, RESTORED), what="the recovery line")
        assert listener.backend_pid not in (None, old)
        assert woken(driver_engine_, queue, events) < 2.0
        assert woken(driver_engine_, queue, events) < 2.0
    assert len(messages(caplog, LOST)) == 1, messages(caplog, "LISTEN")
    assert len(messages(caplog, RESTORED)) == 1, messages(caplog, "LISTEN")
    assert listener.reconnects.losses == 1 and not listener.deaf.is_set()


# -- the async adapters ---------------------------------------------------------------------

@pytest.mark.parametrize("driver", ["asyncpg", "psycopg_async"])
def test_the_async_listener_wakes_and_reconnects(driver: str, pg_url: str, engine: sa.Engine,
                                                 caplog: pytest.LogCaptureFixture) -> None:
    channel = f"venturi_t_{driver}"

    async def scenario() -> None:
        async_engine = create_async_engine(driver_url(pg_url, driver))
        assert async_engine.dialect.is_async
        wake, stopping = asyncio.Event(), asyncio.Event()
        listener = AsyncListener(async_engine, channel, wake, stopping)
        task = asyncio.create_task(listener.run())

        async def woken_by_notify() -> None:
            await asyncio.wait_for(listener.connected.wait(), 20)
            wake.clear()
            async with async_engine.begin() as conn:
                await conn.execute(drivers.notify_statement(channel, "job"))
            await asyncio.wait_for(wake.wait(), 2)

        try:
            await woken_by_notify()
            pid = listener.backend_pid
            assert pid is not None
            wake.clear()
            await asyncio.to_thread(terminate, engine, pid)
            await asyncio.wait_for(wake.wait(), 20)  # the catch-up wake after the reconnect
            assert listener.backend_pid not in (None, pid)
            await woken_by_notify()
        finally:
            stopping.set()
            await asyncio.wait_for(task, 10)
            await async_engine.dispose()
        assert listener.reconnects.losses == 1 and not listener.deaf.is_set()

    with caplog.at_level(logging.INFO, logger="venturi_sa"):
        asyncio.run(scenario())
    assert len(messages(caplog, LOST)) == 1 and len(messages(caplog, RESTORED)) == 1, messages(caplog, "LISTEN")
