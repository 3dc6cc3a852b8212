"""SQLModel applications: the queue's tables in ``SQLModel.metadata``, handlers with SQLModel sessions.

``make_models(prefix, SQLModel)`` registers the tables on SQLModel's
``MetaData`` (so the project's Alembic sees them and finds nothing to change
once migrated), and makes the queue's ``session_class`` ``sqlmodel.Session``;
``Worker(async_session_class=sqlmodel.ext.asyncio.session.AsyncSession)``
gives async handlers sessions with ``.exec()`` too.  Enqueue takes SQLModel's sessions as
they are (subclasses of SQLAlchemy's).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from support.async_engines import make_async_engine
from support.queues import drain, outcomes

import alembic_venturi
from venturi_sa import Complete, JobContext, Models, Queue, Task, make_models

sqlmodel = pytest.importorskip("sqlmodel")
from sqlmodel import Field, SQLModel, select  # noqa: E402
from sqlmodel.ext.asyncio.session import AsyncSession as SQLModelAsyncSession  # noqa: E402


class Hero(SQLModel, table=True):
    __tablename__ = "venturi_test_heroes"

    id: int | None = Field(default=None, primary_key=True)
    name: str


@pytest.fixture
def heroes(engine: sa.Engine) -> Iterator[None]:
    Hero.__table__.create(engine)  # type: ignore[attr-defined]
    yield
    Hero.__table__.drop(engine)  # type: ignore[attr-defined]


@pytest.fixture
def sqlmodels(engine: sa.Engine, prefix: str) -> Models:
    alembic_venturi.upgrade(engine, prefix)
    return make_models(prefix, SQLModel)


def test_the_tables_join_sqlmodel_metadata(engine: sa.Engine, prefix: str, sqlmodels: Models) -> None:
    assert sqlmodels.metadata is SQLModel.metadata
    assert {f"{prefix}_jobs", f"{prefix}_journal"} <= set(SQLModel.metadata.tables)
    assert make_models(prefix, SQLModel) is sqlmodels
    assert make_models(prefix, metadata=SQLModel.metadata) is sqlmodels
    ours = {sqlmodels.jobs_table.name, sqlmodels.journal_table.name}
    with engine.connect() as conn:
        context = MigrationContext.configure(conn, opts={
            "compare_type": True, "compare_server_default": True,
            "include_name": lambda name, type_, parents: type_ != "table" or name in ours,
            "include_object": lambda obj, name, type_, reflected, other: type_ != "table" or name in ours})
        assert compare_metadata(context, SQLModel.metadata) == []


class Recruit(Task):
    KIND = "recruit"

    def run(self, ctx: JobContext) -> Complete:
        ctx.session.add(Hero(name=f"hero of {ctx.job_id}"))
        found = ctx.session.exec(select(Hero).where(Hero.name == f"hero of {ctx.job_id}")).all()
        return Complete(f"{len(found)} recruited")


class RecruitAsync(Task):
    KIND = "recruit_async"

    async def run(self, ctx: JobContext) -> Complete:
        session = ctx.session_async
        session.add(Hero(name=f"async hero of {ctx.job_id}"))
        found = (await session.exec(select(Hero).where(Hero.name.startswith("async")))).all()  # type: ignore[attr-defined]
        return Complete(f"{len(found)} recruited")


def test_handlers_get_sqlmodel_sessions(engine: sa.Engine, sqlmodels: Models, heroes: None) -> None:
    queue = Queue(sqlmodels, [Recruit, RecruitAsync])
    with sqlmodel.Session(engine) as session:
        ids = [job.id for job in queue.enqueue_many(session, [Recruit(), RecruitAsync()])]
        session.commit()
    assert drain(queue, engine, session_class=sqlmodel.Session, async_session_class=SQLModelAsyncSession) == 2
    assert [outcomes(engine, sqlmodels, i) for i in ids] == [["completed"], ["completed"]]
    with sqlmodel.Session(engine) as session:
        assert len(session.exec(select(Hero)).all()) == 2


def test_async_enqueue_in_a_sqlmodel_async_session(engine: sa.Engine, pg_url: str, sqlmodels: Models,
                                                   heroes: None) -> None:
    queue = Queue(sqlmodels, [Recruit])
    async_engine = make_async_engine(pg_url, "asyncpg")

    async def endpoint() -> str:
        async with SQLModelAsyncSession(async_engine) as session:
            session.add(Hero(name="signed up"))
            job = await queue.enqueue_async(session, Recruit())
            job_id = job.id
            await session.commit()
        return job_id

    job_id = asyncio.run(endpoint())
    assert queue.get_job(engine, job_id).status == "pending"


@pytest.mark.parametrize("told", [None, sa.orm.Session], ids=["default", "told-plain"])
def test_a_plain_worker_gives_the_queues_session_class(engine: sa.Engine, sqlmodels: Models,
                                                       told: type[sa.orm.Session] | None) -> None:
    """SQLModel models imply ``sqlmodel.Session`` unless the queue is told another class."""
    seen: list[Any] = []

    class Look(Task):
        KIND = "look"

        def run(self, ctx: JobContext) -> None:
            seen.append(type(ctx.session))

    queue = Queue(sqlmodels, [Look], session_class=told)
    with sqlmodel.Session(engine) as session, session.begin():
        queue.enqueue(session, Look())
    drain(queue, engine)
    [kind] = seen
    assert issubclass(kind, sa.orm.Session) and issubclass(kind, sqlmodel.Session) is (told is None)
