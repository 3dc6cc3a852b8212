"""The async twins that were missing or dropped ``actor=`` before the face generated them, on real PostgreSQL.

``cancel_kind_async``, ``pauses_async`` and ``retry_now_async`` exist;
``requeue_async``, ``kill_async`` and ``release_async`` record the actor
they are given; ``cancel_async`` joins an ``AsyncSession``'s transaction;
``result_async(wait=)`` waits without blocking the event loop.
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession
from support.async_engines import async_engine_fixture  # noqa: F401 - the async_engine fixture
from support.workers import enqueue, job_row, journal

from venturi_sa import Cancelled, JobInfo, PauseInfo, Queue, Task
from venturi_sa.ops import twins


class Mail(Task):
    KIND = "mail"


def _claim(engine: sa.Engine, models: Any, job_id: str) -> None:
    """Make ``job_id`` claimed by a worker that is not there (as a crashed worker leaves it)."""
    jobs = models.jobs_table
    with engine.begin() as conn:
        conn.execute(sa.update(jobs).where(jobs.c.id == job_id).values(
            status="claimed", claimed_by="gone-host:1", run_count=jobs.c.run_count + 1,
            claim_expires_at=sa.func.now() + timedelta(minutes=5)))


def test_admin_twins_record_their_actor(engine: sa.Engine, models: Any, async_engine: AsyncEngine) -> None:
    queue = Queue(models, [Mail])
    a, b = enqueue(engine, queue, Mail(), Mail())
    _claim(engine, models, b)

    async def main() -> list[JobInfo]:
        return [await queue.kill_async(async_engine, a, "spam", actor="u1"),
                await queue.requeue_async(async_engine, a, "fixed", actor="u2"),
                await queue.release_async(async_engine, b, "host gone", actor="u3")]

    killed, requeued, released = asyncio.run(main())
    assert (killed.status, requeued.status, released.status) == ("dead", "pending", "pending")
    assert [e.note for e in journal(engine, models, a)] == ["killed by u1: spam", "requeued by u2: fixed"]
    assert [e.note for e in journal(engine, models, b)] == ["released by u3: host gone"]


def test_retry_now_cancel_kind_and_pauses(engine: sa.Engine, models: Any, async_engine: AsyncEngine) -> None:
    queue = Queue(models, [Mail])
    [later] = enqueue(engine, queue, Mail(), delay=timedelta(hours=1))
    x, y = enqueue(engine, queue, Mail(), Mail())
    _claim(engine, models, y)

    async def main() -> tuple[JobInfo, list[Cancelled], PauseInfo, list[PauseInfo]]:
        retried = await queue.retry_now_async(async_engine, later, "now", actor="u4")
        cancelled = await queue.cancel_kind_async(async_engine, "mail", "bad batch", actor="u5")
        paused = await queue.pause_async(async_engine, "mail", reason="incident", actor="u6",
                                         until=datetime.now(timezone.utc) + timedelta(hours=1))
        return retried, cancelled, paused, await queue.pauses_async(async_engine)

    retried, cancelled, paused, pauses = asyncio.run(main())
    assert retried.id == later and "edited by u4: run now (now)" in [e.note for e in journal(engine, models, later)]
    assert {(c.job_id, c.result) for c in cancelled} == {(later, "cancelled"), (x, "cancelled"), (y, "requested")}
    assert pauses == queue.pauses(engine) == [paused] and paused.actor == "u6"


def test_cancel_async_joins_the_async_session(engine: sa.Engine, models: Any, async_engine: AsyncEngine) -> None:
    queue = Queue(models, [Mail])
    kept, dropped = enqueue(engine, queue, Mail(), Mail())

    async def main() -> None:
        async with AsyncSession(async_engine) as session:
            async with session.begin():
                assert (await queue.cancel_async(session, kept, actor="u7")).result == "cancelled"
            async with session.begin():
                await queue.cancel_async(session, dropped)
                await session.rollback()

    asyncio.run(main())
    assert (job_row(engine, models, kept).status, job_row(engine, models, dropped).status) == ("dead", "pending")


def test_result_async_waits_without_blocking_the_loop(engine: sa.Engine, models: Any, async_engine: AsyncEngine,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """While ``result_async`` waits (never with the blocking sleep), another task on its loop completes the job."""

    def blocked(seconds: float) -> None:
        raise AssertionError("result_async slept with the blocking sleep")

    monkeypatch.setattr(twins, "blocking_sleep", blocked)
    queue = Queue(models, [Mail])
    [job_id] = enqueue(engine, queue, Mail())
    jobs = models.jobs_table

    async def complete_once_waiting(started: asyncio.Event) -> None:
        await started.wait()
        await asyncio.sleep(0.2)  # the waiter's first reads find the job pending
        async with async_engine.begin() as conn:
            await conn.execute(sa.update(jobs).where(jobs.c.id == job_id).values(
                status="completed", finished_at=sa.func.now()))

    async def main() -> Any:
        started = asyncio.Event()
        finisher = asyncio.create_task(complete_once_waiting(started))
        started.set()
        value = await queue.result_async(async_engine, job_id, wait=30)
        await finisher
        return value

    assert asyncio.run(main()) is None  # completed by hand: no journal row, so no attachment


def test_the_sync_result_waits_with_the_blocking_sleep(engine: sa.Engine, models: Any,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    queue = Queue(models, [Mail])
    [job_id] = enqueue(engine, queue, Mail())
    naps: list[float] = []

    class Napped(Exception):
        pass

    def first_nap(seconds: float) -> None:  # the job is pending: the first read is followed by a nap
        naps.append(seconds)
        raise Napped

    monkeypatch.setattr(twins, "blocking_sleep", first_nap)
    with pytest.raises(Napped):
        queue.result(engine, job_id, wait=60)
    assert len(naps) == 1 and 0 < naps[0] <= 0.05
