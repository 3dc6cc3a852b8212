"""Async enqueue: ``enqueue_async``/``enqueue_many_async`` in the caller's AsyncSession, with the sync semantics.

Joins the caller's transaction, dedup coalesces and refuses a stricter
isolation, bad input leaves the session as it was; a sync Session given to
an async call (or the reverse) is a ``TypeError`` naming the right call.
Run on asyncpg and psycopg async.  Commit, rollback, NOTIFY and the dedup
race between two processes are in the conformance suite, per stack.
"""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import Any

import pytest
import sqlalchemy as sa
from marshmallow import Schema, fields
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession
from sqlalchemy.orm import Session
from support.async_engines import async_engine_fixture  # noqa: F401 - the async_engine fixture
from support.queues import count, outcomes

from venturi_sa import InvalidOption, JobContext, Queue, Task, UnknownKind
from venturi_sa.errors import UnsupportedIsolation


class Note(Schema):
    text = fields.String(required=True)


class Plain(Task):
    KIND = "plain"
    Payload = Note

    def run(self, ctx: JobContext) -> None:
        pass


class Refresh(Task):
    KIND = "refresh"
    Payload = Note

    def dedup_key(self) -> str:
        return "one"

    def run(self, ctx: JobContext) -> None:
        pass


@pytest.fixture
def queue(models: Any) -> Queue:
    return Queue(models, [Plain, Refresh])


def test_enqueue_joins_the_callers_transaction(engine: sa.Engine, models: Any, queue: Queue,
                                               async_engine: AsyncEngine) -> None:
    async def main() -> list[str]:
        async with AsyncSession(async_engine) as session, session.begin():
            await session.execute(sa.text("CREATE TEMP TABLE marker (n int) ON COMMIT DROP"))
            jobs = await queue.enqueue_many_async(session, [Plain(text=str(n)) for n in range(50)])
            # the jobs are visible inside this transaction only
            seen = await session.scalar(sa.text(f"SELECT count(*) FROM {models.jobs_table.name}"))
            assert seen == 50
            assert count(engine, models.jobs_table) == 0
            return [job.id for job in jobs]

    ids = asyncio.run(main())
    assert len(set(ids)) == 50 and count(engine, models.jobs_table) == 50


class Unregistered(Task):
    KIND = "unregistered"


def test_bad_input_is_refused_with_the_session_as_it_was(engine: sa.Engine, models: Any, queue: Queue,
                                                         async_engine: AsyncEngine) -> None:
    async def main() -> None:
        async with AsyncSession(async_engine) as session:
            with pytest.raises(UnknownKind, match="unregistered"):
                await queue.enqueue_many_async(session, [Plain(text="ok"), Unregistered()])
            with pytest.raises(InvalidOption, match="priority"):
                await queue.enqueue_async(session, Plain(text="ok"), priority=7)
            with pytest.raises(InvalidOption, match="timezone-aware"):
                await queue.enqueue_async(session, Plain(text="ok"), run_at=datetime(2030, 1, 1))
            assert not session.new
            await session.commit()

    asyncio.run(main())
    assert count(engine, models.jobs_table) == 0


def test_dedup_coalesces_in_an_async_session(engine: sa.Engine, models: Any, queue: Queue,
                                             async_engine: AsyncEngine) -> None:
    async def main() -> list[str]:
        ids = []
        for text in ("a", "b", "c"):
            async with AsyncSession(async_engine) as session, session.begin():
                ids.append((await queue.enqueue_async(session, Refresh(text=text))).id)
        return ids

    ids = asyncio.run(main())
    assert len(set(ids)) == 1
    assert outcomes(engine, models, ids[0]) == ["merged", "merged"]


def test_dedup_refuses_a_stricter_isolation(engine: sa.Engine, models: Any, queue: Queue,
                                            async_engine: AsyncEngine) -> None:
    async def main() -> None:
        strict = async_engine.execution_options(isolation_level="REPEATABLE READ")
        async with AsyncSession(strict) as session:
            await queue.enqueue_async(session, Plain(text="fine"))
            with pytest.raises(UnsupportedIsolation, match="READ COMMITTED"):
                await queue.enqueue_async(session, Refresh(text="refused"))
            await session.rollback()

    asyncio.run(main())
    assert count(engine, models.jobs_table) == 0


# -- the wrong kind of session or engine ------------------------------------------------------

def test_an_async_session_given_to_sync_enqueue_names_the_async_call(queue: Queue,
                                                                     async_engine: AsyncEngine) -> None:
    session = AsyncSession(async_engine)
    with pytest.raises(TypeError, match=r"await queue\.enqueue_async"):
        queue.enqueue(session, Plain(text="x"))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"await queue\.enqueue_many_async"):
        queue.enqueue_many(session, [Plain(text="x")])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"takes a Session, not an AsyncEngine"):
        queue.enqueue(async_engine, Plain(text="x"))  # type: ignore[arg-type]


def test_a_sync_session_given_to_async_enqueue_names_the_sync_call(engine: sa.Engine, models: Any,
                                                                   queue: Queue) -> None:
    async def main() -> None:
        with Session(engine) as session:
            with pytest.raises(TypeError, match=r"use `queue\.enqueue\(session"):
                await queue.enqueue_async(session, Plain(text="x"))  # type: ignore[arg-type]
            with pytest.raises(TypeError, match=r"use `queue\.enqueue_many\(session"):
                await queue.enqueue_many_async(session, [Plain(text="x")])  # type: ignore[arg-type]
            assert not session.new
        with pytest.raises(TypeError, match="takes an AsyncSession, not an Engine"):
            await queue.enqueue_async(engine, Plain(text="x"))  # type: ignore[arg-type]

    asyncio.run(main())
    assert count(engine, models.jobs_table) == 0


def test_an_engine_or_connection_given_to_sync_enqueue_is_refused(engine: sa.Engine, queue: Queue) -> None:
    with pytest.raises(TypeError, match=r"takes a Session, not an Engine.*Session\(engine\)"):
        queue.enqueue(engine, Plain(text="x"))  # type: ignore[arg-type]
    with engine.connect() as conn:
        with pytest.raises(TypeError, match=r"Session\(bind=connection\)"):
            queue.enqueue(conn, Plain(text="x"))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="got str"):
        queue.enqueue("postgresql://", Plain(text="x"))  # type: ignore[arg-type]
