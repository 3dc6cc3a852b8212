"""Async SQLModel end to end (issue 40, item 2): ``Queue(async_session_class=...)`` under every runner.

Each test reproduces a finding from an application on SQLModel + psycopg 3:
an ``async def`` handler's ``ctx.session_async`` was a plain ``AsyncSession``
(no ``.exec``) under the worker and ``drain_async``; ``rolled_back_async_session``
built a plain ``AsyncSession`` expiring on commit; inline ``enqueue_async``
returned a job whose attributes were expired (``MissingGreenlet``).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession
from support.async_engines import ASYNC_DRIVERS, make_async_engine
from support.workers import enqueue

import alembic_venturi
from venturi_sa import JobContext, Models, Queue, Worker, WorkerApp, make_models
from venturi_sa.testing import drain_async, inline, perform_async, rolled_back_async_session

sqlmodel = pytest.importorskip("sqlmodel")
pytest.importorskip("greenlet")
from sqlmodel import Field, SQLModel, select  # noqa: E402 - after the skip
from sqlmodel.ext.asyncio.session import AsyncSession as SQLModelAsyncSession  # noqa: E402

PREFIX = f"sqma{os.getpid()}"


class Sidekick(SQLModel, table=True):
    __tablename__ = f"{PREFIX}_sidekicks"
    id: int | None = Field(default=None, primary_key=True)
    name: str


sqlmodel_models = make_models(PREFIX, SQLModel)
queue = Queue(sqlmodel_models)


@queue.task("count_sidekicks", max_failures=1)
async def count_sidekicks(payload: Any, ctx: JobContext) -> Any:
    session = ctx.session_async
    names = (await session.exec(select(Sidekick.name).order_by(Sidekick.name))).all()  # sqlmodel's only
    session.add(Sidekick(name=f"sidekick {len(names) + 1}"))
    return {"names": list(names), "sqlmodel_session": isinstance(session, SQLModelAsyncSession)}


@pytest.fixture(scope="module")
def sqlmodel_queue(engine: sa.Engine) -> Iterator[Queue]:
    """The module's queue on its own migrated prefix, with its sidekicks table (dropped after)."""
    alembic_venturi.upgrade(engine, PREFIX)
    Sidekick.__table__.create(engine)  # type: ignore[attr-defined]
    yield queue
    Sidekick.__table__.drop(engine)  # type: ignore[attr-defined]


@pytest.fixture(params=ASYNC_DRIVERS)
def driver(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def in_loop(pg_url: str, driver: str, scenario: Callable[[AsyncEngine], Awaitable[None]]) -> None:
    async def main() -> None:
        engine = make_async_engine(pg_url, driver)
        try:
            await scenario(engine)
        finally:
            await engine.dispose()

    asyncio.run(main())


def sidekick_count(engine: sa.Engine) -> int:
    with engine.connect() as conn:
        return int(conn.execute(sa.select(sa.func.count()).select_from(Sidekick.__table__)).scalar_one())


def test_the_async_default_follows_the_models_and_the_runners_take_it(engine: sa.Engine, models: Models,
                                                                      sqlmodel_queue: Queue) -> None:
    class Subclass(AsyncSession):
        pass

    assert Queue(models).async_session_class is AsyncSession
    assert sqlmodel_queue.async_session_class is SQLModelAsyncSession
    told = Queue(models, async_session_class=Subclass)
    assert told.async_session_class is Subclass
    assert Worker(told, engine).async_session_class is Subclass
    assert WorkerApp(told).worker(engine).async_session_class is Subclass
    assert Worker(sqlmodel_queue, engine).async_session_class is SQLModelAsyncSession
    assert Worker(told, engine, async_session_class=AsyncSession).async_session_class is AsyncSession


def test_a_worker_hands_an_async_handler_the_queues_async_session(engine: sa.Engine, sqlmodel_queue: Queue) -> None:
    [job_id] = enqueue(engine, sqlmodel_queue, count_sidekicks())
    try:
        assert Worker(sqlmodel_queue, engine, poll_interval=0.2).run_until_idle() == 1
        assert sqlmodel_queue.get_job(engine, job_id).status == "completed"  # was dead: no .exec on AsyncSession
        assert sqlmodel_queue.result(engine, job_id) == {"names": [], "sqlmodel_session": True}
        assert sidekick_count(engine) == 1  # the handler's write committed with the outcome
    finally:
        with engine.begin() as conn:
            conn.execute(Sidekick.__table__.delete())
            conn.execute(sqlmodel_models.jobs_table.delete())


def test_drain_async_gives_a_plain_test_session_handler_the_queues_async_class(
        engine: sa.Engine, pg_url: str, driver: str, sqlmodel_queue: Queue) -> None:
    async def scenario(async_engine: AsyncEngine) -> None:
        async with rolled_back_async_session(async_engine) as session:  # a plain AsyncSession, as a suite may have
            assert type(session) is AsyncSession
            session.add(Sidekick(name="ada"))
            await sqlmodel_queue.enqueue_async(session, count_sidekicks())
            result = await drain_async(session, sqlmodel_queue)
            assert (result.completed, result.total) == (1, 1)
            names = (await session.scalars(sa.select(Sidekick.name).order_by(Sidekick.name))).all()
            assert names == ["ada", "sidekick 2"]  # the handler's write, in the test's transaction
            done = await perform_async(count_sidekicks(), queue=sqlmodel_queue, session=session)
            assert done.attachment == {"names": ["ada", "sidekick 2"], "sqlmodel_session": True}

    in_loop(pg_url, driver, scenario)
    assert sidekick_count(engine) == 0  # all of it rolled back


def test_rolled_back_async_session_is_of_the_queues_class_and_keeps_attributes_on_commit(
        engine: sa.Engine, pg_url: str, driver: str, sqlmodel_queue: Queue) -> None:
    async def scenario(async_engine: AsyncEngine) -> None:
        async with rolled_back_async_session(async_engine, sqlmodel_queue) as session:
            assert isinstance(session, SQLModelAsyncSession)
            hero = Sidekick(name="grace")
            session.add(hero)
            await session.commit()  # releases a savepoint; nothing expired
            assert (hero.id is not None, hero.name) == (True, "grace")  # no lazy load, so no MissingGreenlet
            assert (await session.exec(select(Sidekick.name))).all() == ["grace"]
            await sqlmodel_queue.enqueue_async(session, count_sidekicks())
            result = await drain_async(session, sqlmodel_queue)  # the test's own session, as is
            assert result.completed == 1 and hero.name == "grace"
        async with rolled_back_async_session(async_engine, expire_on_commit=True) as session:
            assert type(session) is AsyncSession and session.sync_session.expire_on_commit

    in_loop(pg_url, driver, scenario)
    assert sidekick_count(engine) == 0


def test_inline_enqueue_async_returns_a_job_whose_columns_read_without_io(
        pg_url: str, driver: str, sqlmodel_queue: Queue) -> None:
    async def scenario(async_engine: AsyncEngine) -> None:
        async with rolled_back_async_session(async_engine, sqlmodel_queue) as session:
            with inline(sqlmodel_queue) as runner:
                job = await sqlmodel_queue.enqueue_async(session, count_sidekicks())
                # was MissingGreenlet: inline mode expired the job after running it
                assert (job.id, job.status, job.run_count, job.kind) == (
                    runner.runs[0].job_id, "completed", 1, "count_sidekicks")
                [one, two] = await sqlmodel_queue.enqueue_many_async(session, [count_sidekicks(),
                                                                              count_sidekicks()])
                assert (one.status, two.status) == ("completed", "completed") and one.id != two.id

    in_loop(pg_url, driver, scenario)
