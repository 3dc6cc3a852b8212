"""The test helpers for an ``AsyncSession``: each runs its sync twin through ``run_sync``.

Handlers run as the sync helpers run them, with ``ctx.session`` the
AsyncSession's ``sync_session`` (SQLAlchemy's greenlet bridge carries its
statements over the async driver).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from venturi_sa.models import JobBase, Models
from venturi_sa.ops.job_steps import Signalled
from venturi_sa.queue import Queue
from venturi_sa.testing import assertions, drain, purge, sleeps
from venturi_sa.testing.assertions import Scheduled, TaskRef
from venturi_sa.testing.clock import Clock

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession


async def drain_async(session: AsyncSession, queue: Queue, **options: Any) -> drain.DrainResult:
    """:func:`venturi_sa.testing.drain` on an AsyncSession (same options)."""
    return await session.run_sync(lambda s: drain.drain(s, queue, **options))


async def enqueued_async(session: AsyncSession, queue: Queue | Models, task: TaskRef = None) -> list[JobBase]:
    return await session.run_sync(lambda s: assertions.enqueued(s, queue, task))


async def assert_enqueued_async(session: AsyncSession, queue: Queue | Models, task: TaskRef = None, *,
                                payload: Mapping[str, Any] | None = None, priority: int | None = None,
                                scheduled_within: Scheduled | datetime | timedelta | None = None,
                                count: int | None = None) -> list[JobBase]:
    return await session.run_sync(lambda s: assertions.assert_enqueued(
        s, queue, task, payload=payload, priority=priority, scheduled_within=scheduled_within, count=count))


async def refute_enqueued_async(session: AsyncSession, queue: Queue | Models, task: TaskRef = None, *,
                                payload: Mapping[str, Any] | None = None, priority: int | None = None,
                                scheduled_within: Scheduled | datetime | timedelta | None = None) -> None:
    await session.run_sync(lambda s: assertions.refute_enqueued(
        s, queue, task, payload=payload, priority=priority, scheduled_within=scheduled_within))


async def purge_async(session: AsyncSession, queue: Queue | Models) -> int:
    return await session.run_sync(lambda s: purge.purge(s, queue))


async def signal_async(session: AsyncSession, queue: Queue, job_id: str, name: str,
                       payload: Any = None) -> Signalled:
    """:func:`~venturi_sa.testing.signal` on an AsyncSession: in its transaction, nothing committed."""
    return await session.run_sync(lambda s: sleeps.signal(s, queue, job_id, name, payload))


class AsyncClock:
    """:class:`~venturi_sa.testing.Clock` of an AsyncSession's transaction, with awaitable methods."""

    def __init__(self, session: AsyncSession) -> None:
        self._session = session

    async def now(self) -> datetime:
        return await self._session.run_sync(lambda s: Clock(s).now())

    async def set(self, at: datetime) -> datetime:
        return await self._session.run_sync(lambda s: Clock(s).set(at))

    async def advance(self, by: timedelta) -> datetime:
        return await self._session.run_sync(lambda s: Clock(s).advance(by))

    async def freeze(self) -> datetime:
        return await self._session.run_sync(lambda s: Clock(s).freeze())

    async def reset(self) -> None:
        await self._session.run_sync(lambda s: Clock(s).reset())


def clock_async(session: AsyncSession) -> AsyncClock:
    return AsyncClock(session)


@asynccontextmanager
async def rolled_back_async_session(engine: AsyncEngine, queue: Queue | None = None,
                                    **options: Any) -> AsyncIterator[AsyncSession]:
    """An AsyncSession on one connection whose outer transaction is rolled back at exit.

    The ``create_savepoint`` recipe of :func:`~venturi_sa.testing.rolled_back_session`:
    the code under test may commit and roll back (each commit releases a
    savepoint) and nothing outlives the block.  Of ``queue``'s
    ``async_session_class`` (sqlmodel's ``AsyncSession`` for SQLModel models)
    when a queue is given, else SQLAlchemy's ``AsyncSession``.  Its objects
    are not expired on commit (``expire_on_commit=False``, as the worker's
    sessions), so attributes stay readable after ``await session.commit()``
    without a lazy load, which an ``AsyncSession`` cannot do; reload with
    ``await session.refresh(obj)``.  ``options`` go to the session (they
    may set ``expire_on_commit=True``).
    """
    from sqlalchemy.ext.asyncio import AsyncSession

    session_class = queue.async_session_class if queue is not None else AsyncSession
    async with engine.connect() as connection:
        outer = await connection.begin()
        session = session_class(bind=connection, join_transaction_mode="create_savepoint",
                                **{"expire_on_commit": False, **options})
        try:
            yield session
        finally:
            await session.close()
            await outer.rollback()


__all__ = ["AsyncClock", "assert_enqueued_async", "clock_async", "drain_async", "enqueued_async", "purge_async",
           "refute_enqueued_async", "rolled_back_async_session", "signal_async"]
