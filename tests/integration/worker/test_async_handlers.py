"""Async handlers: ``async def run`` and ``@task`` on an ``async def`` run on the worker's loop.

Their outcomes go through the same executor pipeline as sync handlers;
``ctx.session_async`` commits with the outcome (exactly once, fenced);
shutdown gives them the grace period, then releases and cancels them; caps
count them.  The worker also runs on an AsyncEngine.
"""

from __future__ import annotations

import asyncio
import threading
from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from marshmallow import Schema, fields
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, create_async_engine
from support.async_engines import async_engine_fixture, make_async_engine  # noqa: F401 - the async_engine fixture
from support.queues import drain, outcomes, side_rows, side_table
from support.waiting import Events
from support.workers import enqueue, job_row, journal, running, steal

from venturi_sa import Complete, InvalidOption, JobContext, Pause, Queue, Retry, Task, Worker
from venturi_sa.errors import AsyncDriverMissing
from venturi_sa.worker import connections


async def side_write_async(session: AsyncSession, table: str, ctx: JobContext, note: str = "") -> None:
    await session.execute(sa.text(f"INSERT INTO {table} (job_id, run_no, note) VALUES (:j, :r, :n)"),
                          {"j": ctx.job_id, "r": ctx.run_count, "n": note})


class Step(Schema):
    done = fields.Integer(required=True)


class Stepper(Task):
    """Pauses with a carry twice, fails once, then completes."""

    KIND = "stepper"
    Carry = Step

    async def run(self, ctx: JobContext) -> Any:
        await asyncio.sleep(0)  # really on a loop
        state = ctx.carry or {"done": 0}
        ctx.carry = {"done": state["done"] + 1}
        ctx.set_attachment({"step": ctx.carry["done"]})
        if ctx.carry["done"] < 3:
            return Pause(note=f"step {ctx.carry['done']}")
        if ctx.failure_count == 0:
            raise ConnectionError("flaky")
        return Complete("all steps")

    @classmethod
    def backoff(cls, failure_count: int) -> timedelta:
        return timedelta(0)


def test_outcomes_of_an_async_run(engine: sa.Engine, models: Any) -> None:
    assert Stepper.is_async
    queue = Queue(models, [Stepper])
    [job_id] = enqueue(engine, queue, Stepper())
    drain(queue, engine)
    rows = journal(engine, models, job_id)
    assert [(r.run_no, r.outcome) for r in rows] == [
        (1, "paused"), (2, "paused"), (3, "retried"), (4, "completed")]
    assert rows[2].note == "ConnectionError: flaky"
    assert [r.attachment for r in rows] == [{"step": n} for n in (1, 2, 3, 3)]
    row = job_row(engine, models, job_id)
    assert (row.status, row.failure_count, row.carry) == ("completed", 1, {"done": 3})


def test_task_decorator_on_an_async_function(engine: sa.Engine, models: Any) -> None:
    queue = Queue(models)

    @queue.task("greet", payload=Step, max_failures=1)
    async def greet(payload: dict[str, int], ctx: JobContext) -> Retry | Complete:
        await asyncio.sleep(0)
        return Complete(f"greeted {payload['done']}") if payload["done"] else Retry("nobody")

    assert greet.is_async
    ok, dead = enqueue(engine, queue, greet(done=1), greet(done=0))
    drain(queue, engine)
    assert journal(engine, models, ok)[-1].note == "greeted 1"
    assert job_row(engine, models, dead).status == "dead"


def test_a_returned_value_is_the_result_as_for_sync_runs(engine: sa.Engine, models: Any) -> None:
    class Odd(Task):
        KIND = "odd"

        async def run(self, ctx: JobContext) -> Any:
            return 42

    queue = Queue(models, [Odd])
    [job_id] = enqueue(engine, queue, Odd())
    drain(queue, engine)
    entry = journal(engine, models, job_id)[-1]
    assert (entry.outcome, entry.attachment) == ("completed", 42)


# -- ctx.session_async: exactly once, fenced ------------------------------------------------

def test_session_async_commits_with_the_outcome_exactly_once(engine: sa.Engine, models: Any, prefix: str) -> None:
    side = side_table(engine, prefix)

    class Write(Task):
        KIND = "write"

        @classmethod
        def backoff(cls, failure_count: int) -> timedelta:
            return timedelta(0)

        async def run(self, ctx: JobContext) -> Complete:
            session = ctx.session_async
            assert isinstance(session, AsyncSession)
            await side_write_async(session, side, ctx, "attempt")
            if ctx.run_count == 1:
                raise RuntimeError("after writing")  # the write is rolled back with the run
            return Complete("written")

    queue = Queue(models, [Write])
    [job_id] = enqueue(engine, queue, Write())
    drain(queue, engine)
    assert outcomes(engine, models, job_id) == ["retried", "completed"]
    assert [(r.run_no, r.note) for r in side_rows(engine, side)] == [(2, "attempt")]


def test_a_zombie_async_run_commits_nothing(engine: sa.Engine, models: Any, prefix: str) -> None:
    side = side_table(engine, prefix)

    class Zombie(Task):
        KIND = "zombie"

        async def run(self, ctx: JobContext) -> Complete:
            await side_write_async(ctx.session_async, side, ctx, "late")
            await ctx.session_async.flush()
            await asyncio.to_thread(steal, engine, models, ctx.job_id, "zombie", "thief-host:1")
            return Complete("finished late")

    queue = Queue(models, [Zombie])
    [job_id] = enqueue(engine, queue, Zombie())
    drain(queue, engine, concurrency=1)
    row = job_row(engine, models, job_id)
    assert (row.status, row.claimed_by, row.run_count) == ("claimed", "thief-host:1", 2)
    assert outcomes(engine, models, job_id) == ["stale-recovered"]
    assert side_rows(engine, side) == []


def test_one_run_uses_one_session(engine: sa.Engine, models: Any) -> None:
    class Both(Task):
        KIND = "both"
        max_failures = 1

        async def run(self, ctx: JobContext) -> None:
            ctx.session_async  # noqa: B018 - opening it is the point
            ctx.session  # noqa: B018

    queue = Queue(models, [Both])
    [job_id] = enqueue(engine, queue, Both())
    drain(queue, engine)
    assert "use either ctx.session or ctx.session_async" in journal(engine, models, job_id)[-1].note


def test_no_async_driver_names_the_extra(engine: sa.Engine, models: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(connections, "_installed", lambda driver: False)

    class Needs(Task):
        KIND = "needs"
        max_failures = 1

        async def run(self, ctx: JobContext) -> None:
            ctx.session_async  # noqa: B018

    queue = Queue(models, [Needs])
    [job_id] = enqueue(engine, queue, Needs())
    drain(queue, engine)
    note = journal(engine, models, job_id)[-1].note
    assert "AsyncDriverMissing" in note and "venturi[psycopg]" in note and "venturi[asyncpg]" in note
    with pytest.raises(AsyncDriverMissing):
        connections.async_sibling_url(engine)


# -- shutdown --------------------------------------------------------------------------------

class Sleeper(Task):
    KIND = "sleeper"
    seconds = 30.0
    cancelled = threading.Event()
    started = threading.Event()

    async def run(self, ctx: JobContext) -> Complete:
        type(self).started.set()
        try:
            await asyncio.sleep(type(self).seconds)
        except asyncio.CancelledError:
            type(self).cancelled.set()
            raise
        return Complete("slept")


def _sleeper(seconds: float) -> type[Sleeper]:
    return type("Sleeper", (Sleeper,), {"KIND": "sleeper", "seconds": seconds, "cancelled": threading.Event(),
                                        "started": threading.Event()})


@pytest.mark.parametrize("now", [False, True], ids=["past-grace", "stop-now"])
def test_stop_releases_and_cancels_a_running_async_handler(engine: sa.Engine, models: Any, now: bool) -> None:
    kind = _sleeper(30.0)
    queue = Queue(models, [kind])
    [job_id] = enqueue(engine, queue, kind())
    events = Events()
    worker = Worker(queue, engine, grace=0.3 if not now else 30.0, on_event=events, poll_interval=0.2)
    with running(worker):
        assert kind.started.wait(20)
        worker.stop(now=now)
        assert kind.cancelled.wait(20), "the async handler was not cancelled"
        events.wait_for("finished", job_id=job_id, outcome="released")
    row = job_row(engine, models, job_id)
    assert (row.status, row.failure_count) == ("pending", 0)
    assert outcomes(engine, models, job_id) == ["released"]


def test_an_async_handler_finishing_within_grace_completes(engine: sa.Engine, models: Any) -> None:
    kind = _sleeper(0.3)
    queue = Queue(models, [kind])
    [job_id] = enqueue(engine, queue, kind())
    events = Events()
    worker = Worker(queue, engine, grace=20.0, on_event=events, poll_interval=0.2)
    with running(worker):
        assert kind.started.wait(20)
        worker.stop()
    assert outcomes(engine, models, job_id) == ["completed"]
    assert not kind.cancelled.is_set()


# -- caps ------------------------------------------------------------------------------------

def test_caps_count_async_runs(engine: sa.Engine, models: Any) -> None:
    peak = {"now": 0, "max": 0}

    class Capped(Task):
        KIND = "capped"
        concurrency = 2

        async def run(self, ctx: JobContext) -> None:
            peak["now"] += 1  # all on one loop: no lock needed
            peak["max"] = max(peak["max"], peak["now"])
            await asyncio.sleep(0.02)
            peak["now"] -= 1

    queue = Queue(models, [Capped])
    enqueue(engine, queue, *[Capped() for _ in range(8)])
    assert drain(queue, engine, concurrency=6) == 8
    assert peak["max"] == 2


# -- a worker on an AsyncEngine --------------------------------------------------------------

def test_a_worker_on_an_async_engine(engine: sa.Engine, models: Any, prefix: str, async_engine: AsyncEngine) -> None:
    side = side_table(engine, prefix)

    class AsyncWrite(Task):
        KIND = "async_write"

        async def run(self, ctx: JobContext) -> Complete:
            assert ctx.session_async.bind is not None
            await side_write_async(ctx.session_async, side, ctx, "async")
            return Complete()

    class SyncWrite(Task):
        KIND = "sync_write"

        def run(self, ctx: JobContext) -> Complete:
            ctx.session.execute(sa.text(f"INSERT INTO {side} (job_id, run_no, note) VALUES (:j, 1, 'sync')"),
                                {"j": ctx.job_id})
            return Complete()

    queue = Queue(models, [AsyncWrite, SyncWrite])
    ids = enqueue(engine, queue, AsyncWrite(), SyncWrite(), AsyncWrite())
    worker = Worker(queue, async_engine, concurrency=3, poll_interval=0.2)
    assert worker.engine is async_engine  # claims and outcomes go through the async driver
    assert worker.run_until_idle() == 3
    assert all(outcomes(engine, models, i) == ["completed"] for i in ids)
    assert sorted(r.note for r in side_rows(engine, side)) == ["async", "async", "sync"]


def test_worker_engine_arguments_are_checked(engine: sa.Engine, models: Any, pg_url: str) -> None:
    queue = Queue(models)
    with pytest.raises(TypeError, match="Engine or an AsyncEngine"):
        Worker(queue, sa.orm.Session(engine))  # type: ignore[arg-type]
    asyncpg_sync = sa.create_engine(make_async_engine(pg_url, "asyncpg").url)
    with pytest.raises(TypeError, match="create_async_engine"):
        Worker(queue, asyncpg_sync)
    with pytest.raises(InvalidOption, match="sync_engine"):
        Worker(queue, engine, sync_engine=engine)


def test_sibling_urls(monkeypatch: pytest.MonkeyPatch) -> None:
    url = sa.make_url("postgresql+psycopg2://u:secret@db:5433/app?sslmode=require&host=/run/pg")
    assert connections.async_sibling_url(sa.create_engine(url)).drivername == "postgresql+psycopg_async"
    sync = connections.sync_sibling_url(create_async_engine(url.set(drivername="postgresql+psycopg_async")))
    assert (sync.drivername, sync.password, dict(sync.query)) == ("postgresql+psycopg", "secret",
                                                                 {"sslmode": "require", "host": "/run/pg"})
    from_asyncpg = connections.sync_sibling_url(create_async_engine(url.set(drivername="postgresql+asyncpg",
                                                                        query={"host": "/run/pg"})))
    assert (from_asyncpg.drivername, dict(from_asyncpg.query)) == ("postgresql+psycopg2", {"host": "/run/pg"})
    monkeypatch.setattr(connections, "_installed", lambda driver: driver == "asyncpg")
    to_asyncpg = connections.async_sibling_url(sa.create_engine(url))
    assert (to_asyncpg.drivername, to_asyncpg.port, to_asyncpg.password, dict(to_asyncpg.query)) == (
        "postgresql+asyncpg", 5433, "secret", {"host": "/run/pg"})
