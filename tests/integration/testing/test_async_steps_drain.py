"""Durable steps of ``async def`` handlers under ``drain_async``, and inline ``enqueue_async``'s returned job.

The ``*_async`` twins (``ctx.step_async``, ``ctx.sleep_async``,
``ctx.wait_for_async``) work in the test's transaction; the sync names,
which would block the test's loop, are refused naming their twin.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from support.async_engines import make_async_engine

from venturi_sa import InvalidOption, JobContext, Models, Queue, Task
from venturi_sa.testing import drain_async, inline, rolled_back_async_session, signal_async

pytest.importorskip("greenlet")


def in_session(pg_url: str, scenario: Any) -> None:
    async def main() -> None:
        engine = make_async_engine(pg_url, "psycopg_async")
        try:
            async with rolled_back_async_session(engine) as session:
                await scenario(session)
        finally:
            await engine.dispose()

    asyncio.run(main())


def steps_queue(models: Models) -> Queue:
    queue = Queue(models)

    @queue.register
    class Reminder(Task):
        KIND = "async_reminder"

        async def run(self, ctx: JobContext) -> Any:
            async def fetch() -> str:
                await asyncio.sleep(0)
                return "fetched"

            got = await ctx.step_async("fetch", fetch)
            await ctx.sleep_async(timedelta(days=1))
            answer = await ctx.wait_for_async("answer", timeout=timedelta(days=7))
            return {"got": got, "answer": answer}

    return queue


def test_the_async_twins_sleep_wait_and_step_under_drain_async(pg_url: str, models: Models) -> None:
    queue = steps_queue(models)

    async def scenario(session: Any) -> None:
        job = await queue.enqueue_async(session, queue.registry.get("async_reminder")())
        job_id = job.id
        result = await drain_async(session, queue)
        assert (result.total, result.paused) == (2, 2)  # asleep, then woken a day later into the wait
        assert (await signal_async(session, queue, job_id, "answer", "yes")).result == "woke"
        result = await drain_async(session, queue)
        assert result.completed == 1
        assert await session.run_sync(lambda s: queue.result(s, job_id)) == {"got": "fetched", "answer": "yes"}

    in_session(pg_url, scenario)


@pytest.mark.parametrize(("call", "twin"), [("wait_for", "wait_for_async"), ("sleep", "sleep_async"),
                                            ("step", "step_async"), ("checkpoint", "checkpoint_async")])
def test_a_sync_step_call_in_an_async_handler_names_its_twin(pg_url: str, models: Models, call: str,
                                                             twin: str) -> None:
    queue = Queue(models)
    calls = {"wait_for": lambda ctx: ctx.wait_for("answer", timeout=60), "sleep": lambda ctx: ctx.sleep(60),
             "step": lambda ctx: ctx.step("fetch", lambda: 1), "checkpoint": lambda ctx: ctx.checkpoint({})}

    @queue.register
    class Blocking(Task):
        KIND = "blocking_steps"

        async def run(self, ctx: JobContext) -> None:
            calls[call](ctx)

    async def scenario(session: Any) -> None:
        await queue.enqueue_async(session, Blocking())
        with pytest.raises(InvalidOption) as err:
            await drain_async(session, queue)
        assert f"ctx.{call}() from an async def handler" in str(err.value)
        assert f"use `await ctx.{twin}(...)`" in str(err.value)

    in_session(pg_url, scenario)


def test_inline_enqueue_async_of_an_async_handler_returns_a_readable_job(pg_url: str, models: Models) -> None:
    queue = Queue(models)

    @queue.register
    class Noted(Task):
        KIND = "noted"

        async def run(self, ctx: JobContext) -> Any:
            return {"seen": (await ctx.session_async.execute(sa.select(sa.literal(1)))).scalar_one()}

    async def scenario(session: Any) -> None:
        with inline(queue):
            job = await queue.enqueue_async(session, Noted())
            assert (job.status, job.run_count, job.kind) == ("completed", 1, "noted")  # was MissingGreenlet
            assert await session.run_sync(lambda s: queue.result(s, job.id)) == {"seen": 1}

    in_session(pg_url, scenario)
