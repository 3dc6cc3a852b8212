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
from venturi_sa.queue import Queue
from venturi_sa.testing import assertions, drain, purge
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
async def rolled_back_async_session(engine: AsyncEngine, **options: Any) -> AsyncIterator[AsyncSession]:
    """An AsyncSession whose outer transaction is rolled back at exit (``create_savepoint`` recipe)."""
    from sqlalchemy.ext.asyncio import AsyncSession

    async with engine.connect() as connection:
        outer = await connection.begin()
        session = AsyncSession(bind=connection, join_transaction_mode="create_savepoint", **options)
        try:
            yield session
        finally:
            await session.close()
            await outer.rollback()


__all__ = ["AsyncClock", "assert_enqueued_async", "clock_async", "drain_async", "enqueued_async", "purge_async",
           "refute_enqueued_async", "rolled_back_async_session"]
