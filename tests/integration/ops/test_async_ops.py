"""The operations API on an AsyncEngine: the sync operations run through the greenlet bridge.

Each ``*_async`` call must return exactly what its sync twin returns on the
same database, through the async driver, and refuse the wrong kind of
object with a ``TypeError`` naming the right call.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession
from sqlalchemy.orm import Session
from support.async_engines import async_engine_fixture  # noqa: F401 - the async_engine fixture
from support.factories import db_now
from support.ops import factory_session
from support.workers import enqueue

from venturi_sa import InvalidJobId, InvalidTransition, JobNotFound, Queue, SchemaNotMigrated, Task, make_models
from venturi_sa.models.job_ids import new_job_id


class Mail(Task):
    KIND = "mail"


@pytest.fixture
def queue(models: Any) -> Queue:
    return Queue(models, [Mail])


def _make(engine: sa.Engine, models: Any, **traits: Any) -> str:
    with factory_session(engine, models) as (Job, _):
        job_id: str = Job(kind="mail", **traits).id
    return job_id


def test_reads_match_the_sync_calls(engine: sa.Engine, models: Any, queue: Queue,
                                    async_engine: AsyncEngine) -> None:
    [pending] = enqueue(engine, queue, Mail())
    done = _make(engine, models, completed=True, finished_at=db_now(-timedelta(days=2)))

    async def main() -> tuple[Any, ...]:
        return (await queue.get_job_async(async_engine, pending),
                await queue.journal_async(async_engine, done),
                await queue.history_async(async_engine, status="completed", limit=10),
                await queue.stats_async(async_engine))

    job, journal, page, stats = asyncio.run(main())
    assert job == queue.get_job(engine, pending)
    assert journal == queue.journal(engine, done)
    assert page == queue.history(engine, status="completed", limit=10)
    assert [j.id for j in page.items] == [done]
    assert (stats.pending, stats.completed, stats.total) == (1, 1, 2)


def test_actions_and_cleanup(engine: sa.Engine, models: Any, queue: Queue, async_engine: AsyncEngine) -> None:
    [pending] = enqueue(engine, queue, Mail())
    dead = _make(engine, models, dead=True, run_count=5, failure_count=5)
    claimed = _make(engine, models, claimed=True)
    old = _make(engine, models, completed=True, finished_at=db_now(-timedelta(days=40)))

    async def main() -> tuple[Any, ...]:
        killed = await queue.kill_async(async_engine, pending, note="spam")
        requeued = await queue.requeue_async(async_engine, dead, note="fixed")
        released = await queue.release_async(async_engine, claimed, note="host gone")
        with pytest.raises(InvalidTransition, match="kill"):
            await queue.kill_async(async_engine, old)
        dry = await queue.cleanup_async(async_engine, older_than=timedelta(days=30), dry_run=True)
        deleted = await queue.cleanup_async(async_engine, older_than=timedelta(days=30), batch_size=1)
        return killed, requeued, released, dry, deleted

    killed, requeued, released, dry, deleted = asyncio.run(main())
    assert (killed.status, requeued.status, released.status) == ("dead", "pending", "pending")
    assert requeued.failure_count == 0
    assert (dry, deleted) == (1, 1)
    with pytest.raises(JobNotFound):
        queue.get_job(engine, old)
    assert queue.journal(engine, pending)[-1].outcome == "dead"


def test_errors_surface_as_in_the_sync_calls(engine: sa.Engine, prefix: str, queue: Queue,
                                             async_engine: AsyncEngine) -> None:
    unmigrated = Queue(make_models(f"{prefix}_nothing"))

    absent = new_job_id()

    async def main() -> None:
        with pytest.raises(JobNotFound, match=f"no job with id '{absent}'"):
            await queue.get_job_async(async_engine, absent)
        with pytest.raises(JobNotFound):
            await queue.journal_async(async_engine, absent)
        with pytest.raises(InvalidJobId, match="got 'nope'"):  # before any SQL, as in the sync call
            await queue.journal_async(async_engine, "nope")
        with pytest.raises(SchemaNotMigrated, match="venturi migrate"):
            await unmigrated.stats_async(async_engine)

    asyncio.run(main())


def test_the_wrong_kind_of_bind_names_the_right_call(engine: sa.Engine, queue: Queue,
                                                      async_engine: AsyncEngine) -> None:
    with pytest.raises(TypeError, match=r"await queue\.stats_async\(engine"):
        queue.stats(async_engine)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"await queue\.requeue_async\(engine"):
        queue.requeue(async_engine, "x")  # type: ignore[arg-type]
    with Session(engine) as session, pytest.raises(TypeError, match=r"session\.get_bind\(\)"):
        queue.journal(session, "x")  # type: ignore[arg-type]
    with engine.connect() as conn, pytest.raises(TypeError, match=r"connection\.engine"):
        queue.cleanup(conn, older_than=timedelta(days=1))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="async driver"):
        queue.stats(async_engine.sync_engine)

    async def main() -> None:
        with pytest.raises(TypeError, match=r"use `queue\.get_job\(engine"):
            await queue.get_job_async(engine, "x")  # type: ignore[arg-type]
        async with AsyncSession(async_engine) as session:
            with pytest.raises(TypeError, match=r"session\.get_bind\(\)"):
                await queue.history_async(session)  # type: ignore[arg-type]

    asyncio.run(main())
