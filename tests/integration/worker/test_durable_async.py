"""Durable sleeps and waits in ``async def`` handlers, and ``queue.signal_async`` in an ``AsyncSession``."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta, timezone
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession
from support.async_engines import async_engine_fixture  # noqa: F401 - the async_engine fixture
from support.hooks import drain
from support.workers import enqueue, job_row

from venturi_sa import JobContext, Queue, Task

runs: list[int] = []


class AsyncFlow(Task):
    KIND = "async_flow"

    async def run(self, ctx: JobContext) -> Any:
        runs.append(ctx.run_count)
        await ctx.sleep_until_async(datetime.now(timezone.utc) - timedelta(seconds=1))  # past: returns at once
        await ctx.sleep_async(0, name="zero")
        return await ctx.wait_for_async("go", timeout=timedelta(hours=1))


def test_async_handlers_wait_and_signal_async_wakes_them(engine: sa.Engine, models: Any,
                                                         async_engine: AsyncEngine) -> None:
    runs.clear()
    queue = Queue(models, [AsyncFlow])
    [job_id] = enqueue(engine, queue, AsyncFlow())
    drain(queue, engine)
    assert runs == [1] and job_row(engine, models, job_id).status == "pending"

    async def send(rollback: bool) -> str:
        async with AsyncSession(async_engine) as session:
            async with session.begin():
                sent = await queue.signal_async(session, job_id, "go", {"n": 1})
                if rollback:
                    await session.rollback()
            return sent.result

    assert asyncio.run(send(rollback=True)) == "woke"
    assert asyncio.run(queue.signals_async(async_engine, job_id)) == []
    assert asyncio.run(send(rollback=False)) == "woke"
    drain(queue, engine)
    assert queue.result(engine, job_id) == {"n": 1}
    assert [s.name for s in asyncio.run(queue.steps_async(async_engine, job_id))] == ["sleep#1", "zero", "go"]
