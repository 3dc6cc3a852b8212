"""The stack parameter of the conformance matrix, and acting through one stack.

Import the fixtures into a test module (``from support.stacks import app_engine_fixture, engine_fixture,
stack_fixture``):
``stack`` is each supported :class:`~support.drivers.Stack` in turn; ``engine``
(overriding the per-driver one) is the sync engine the test seeds and reads
through; ``app_engine`` is what the application gives venturi on that stack
(an ``AsyncEngine`` for the async ones, used on the worker loop only).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.exc import InvalidRequestError
from sqlalchemy.orm import Session

from support.drivers import CONFORMANCE_STACKS, Engines, Stack, on_loop
from venturi_sa import JobContext, Queue, Task

Body = Callable[[Task, JobContext, Session | None], Any]


@pytest.fixture(name="stack", params=CONFORMANCE_STACKS, ids=lambda s: s.id)
def stack_fixture(request: pytest.FixtureRequest) -> Stack:
    return request.param  # type: ignore[no-any-return]


@pytest.fixture(name="engine")
def engine_fixture(stack: Stack, engines: Engines) -> sa.Engine:
    """The sync engine this test seeds and reads through (the stack's own driver where it has a sync API)."""
    return engines.sync(stack.sync_driver)


@pytest.fixture(name="app_engine")
def app_engine_fixture(stack: Stack, engines: Engines) -> Any:
    """The engine the application hands venturi on ``stack``."""
    return engines.of(stack)


def handler(stack: Stack, body: Body, session: bool = True) -> Callable[..., Any]:
    """A ``Task.run`` for ``stack`` around the sync ``body(task, ctx, session)``.

    Sync stacks: a plain ``def`` given ``ctx.session``.  Async stacks: an
    ``async def`` whose body runs in ``ctx.session_async`` (``run_sync``, so
    its statements go through the async driver); with ``session=False`` the
    body may block and runs in a thread (``asyncio.to_thread``) instead.
    """
    if not stack.is_async:
        def run(self: Task, ctx: JobContext) -> Any:
            return body(self, ctx, ctx.session if session else None)
        return run

    async def run_async(self: Task, ctx: JobContext) -> Any:
        if session:
            return await ctx.session_async.run_sync(lambda s: body(self, ctx, s))
        return await asyncio.to_thread(body, self, ctx, None)
    return run_async


class AppSession:
    """The application's session on a stack: a ``Session``, or an ``AsyncSession`` driven on the worker loop."""

    def __init__(self, app_engine: Any) -> None:
        self.is_async = not isinstance(app_engine, sa.Engine)
        if self.is_async:
            from sqlalchemy.ext.asyncio import AsyncSession

            self._async = AsyncSession(app_engine)
        else:
            self._sync = Session(app_engine)

    def enqueue(self, queue: Queue, task: Task, **options: Any) -> str:
        if self.is_async:
            return on_loop(queue.enqueue_async(self._async, task, **options)).id
        return queue.enqueue(self._sync, task, **options).id

    def enqueue_ids(self, queue: Queue, tasks: list[Task]) -> list[str]:
        """``enqueue_many(..., ids_only=True)`` (or its async twin): the ids, no ``Job`` objects."""
        if self.is_async:
            return on_loop(queue.enqueue_many_async(self._async, tasks, ids_only=True))
        return queue.enqueue_many(self._sync, tasks, ids_only=True)

    def commit(self) -> None:
        on_loop(self._async.commit()) if self.is_async else self._sync.commit()

    def rollback(self) -> None:
        on_loop(self._async.rollback()) if self.is_async else self._sync.rollback()

    def close(self) -> None:
        on_loop(self._async.close()) if self.is_async else self._sync.close()


def refused_without_async_api(unsupported: Stack, url: str) -> bool:
    """For the async stack on psycopg2 (no async API), assert SQLAlchemy refuses the engine; True if it was that one."""
    if not unsupported.is_async:
        return False
    from sqlalchemy.ext.asyncio import create_async_engine

    with pytest.raises(InvalidRequestError, match="requires an async driver"):
        create_async_engine(url)
    return True
