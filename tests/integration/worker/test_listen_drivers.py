"""LISTEN on every driver: the sync adapters, and a worker's terminated listener backend.

A worker on a sync engine (psycopg2, psycopg) listens in a thread; one on an
AsyncEngine (asyncpg, psycopg async) runs
:class:`~venturi_sa.worker.listener.AsyncListener` on the worker loop.  Both
must reconnect once, log one line each way, wake to catch up and keep waking.
A lost connection is made with ``pg_terminate_backend`` on the listener's
own server process.  (The wake-up itself is in the conformance suite.)
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import sqlalchemy as sa
from support.async_engines import ASYNC_DRIVERS, make_async_engine
from support.drivers import SYNC_DRIVERS, driver_engine
from support.waiting import Events, wait_until
from support.workers import enqueue, running

from venturi_sa import Queue, Task, Worker
from venturi_sa.storage import drivers

LOST, RESTORED = "LISTEN connection lost", "LISTEN connection restored"


class Ping(Task):
    KIND = "ping"


@pytest.fixture(params=SYNC_DRIVERS)
def driver_engine_(request: pytest.FixtureRequest, pg_url: str) -> Iterator[sa.Engine]:
    eng = driver_engine(pg_url, request.param)
    yield eng
    eng.dispose()


@contextmanager
def disposed(engine: Any) -> Iterator[None]:
    try:
        yield
    finally:
        if isinstance(engine, sa.Engine):
            engine.dispose()  # an AsyncEngine's are closed by the worker, on its loop


def terminate(engine: sa.Engine, pid: int) -> None:
    with engine.connect() as conn:
        assert conn.execute(sa.select(sa.func.pg_terminate_backend(pid))).scalar_one()
        conn.commit()


def messages(caplog: pytest.LogCaptureFixture, text: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if text in r.getMessage()]


# The worker polls every POLL s: a job done within WOKEN (well under it) was woken by the NOTIFY,
# however loaded the machine is.
POLL = 120.0
WOKEN = 30.0


def woken(engine: sa.Engine, queue: Queue, events: Events) -> float:
    """Enqueue one job into an idle worker; seconds until it finished (at most ``WOKEN``, or the test fails)."""
    mark = events.mark()
    start = time.monotonic()
    [job_id] = enqueue(engine, queue, Ping())
    at, _ = events.wait_for("finished", after=mark, timeout=WOKEN, job_id=job_id)
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


@pytest.mark.parametrize("driver", SYNC_DRIVERS + ASYNC_DRIVERS)
def test_a_terminated_listener_reconnects_once_and_still_wakes(driver: str, pg_url: str, engine: sa.Engine,
                                                              models: Any, caplog: pytest.LogCaptureFixture) -> None:
    queue = Queue(models, [Ping])
    events = Events()
    worker_engine = make_async_engine(pg_url, driver) if driver in ASYNC_DRIVERS else driver_engine(pg_url, driver)
    worker = Worker(queue, worker_engine, poll_interval=POLL, on_event=events)
    with caplog.at_level(logging.INFO, logger="venturi_sa"), disposed(worker_engine), running(worker):
        events.wait_for("idle")
        listener = worker.listener
        assert listener is not None and listener.connected.wait(20)
        old = listener.backend_pid
        assert old is not None
        terminate(engine, old)
        wait_until(lambda: messages(caplog, RESTORED), what="the recovery line")
        assert listener.backend_pid not in (None, old)
        assert woken(engine, queue, events) < WOKEN
        assert woken(engine, queue, events) < WOKEN
    assert len(messages(caplog, LOST)) == 1, messages(caplog, "LISTEN")
    assert len(messages(caplog, RESTORED)) == 1, messages(caplog, "LISTEN")
    assert listener.reconnects.losses == 1 and not listener.deaf.is_set()
