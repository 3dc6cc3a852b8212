"""The reads of one job given the caller's ``Session`` or ``Connection`` read in its transaction.

``get_job``, ``explain``, ``result``, ``steps``, ``signals`` and ``parents``
(and their ``*_async`` twins with an ``AsyncSession`` or ``AsyncConnection``)
see what the caller's uncommitted transaction wrote, and leave it open and
uncommitted: a rollback afterwards leaves nothing.  ``result(wait=...)`` is
refused there.  The same reads on the engine see none of it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, AsyncSession
from sqlalchemy.orm import Session
from support.async_engines import async_engine_fixture  # noqa: F401 - the async_engine fixture

from venturi_sa import InvalidOption, JobNotCompleted, JobNotFound, Queue, Task


class Fetch(Task):
    KIND = "fetch"


class Report(Task):
    KIND = "report"


@contextmanager
def caller(engine: sa.Engine, kind: str) -> Iterator[tuple[Session, Session | sa.Connection]]:
    """An open, uncommitted transaction: the Session to enqueue with and the object the reads are given."""
    if kind == "session":
        with Session(engine) as session:
            session.begin()
            yield session, session
        return
    with engine.connect() as conn:
        conn.begin()
        with Session(bind=conn) as session:  # joins the connection's transaction, never commits it
            yield session, conn


def _write(queue: Queue, session: Session) -> tuple[str, str]:
    """A parent, a child waiting on it with a signal stored, uncommitted; the child is marked completed too."""
    parent = queue.enqueue(session, Fetch()).id
    child = queue.enqueue(session, Report(), after=[parent]).id
    assert queue.signal(session, child, "approved", {"by": "ann"}).result == "stored"
    return parent, child


def _gone(queue: Queue, engine: sa.Engine, *job_ids: str) -> bool:
    """None of ``job_ids`` is visible outside the caller's transaction."""
    for job_id in job_ids:
        with pytest.raises(JobNotFound):
            queue.get_job(engine, job_id)
    return True


@pytest.mark.parametrize("kind", ["session", "connection"])
def test_each_read_sees_the_callers_uncommitted_writes(engine: sa.Engine, models: Any, kind: str) -> None:
    queue = Queue(models, [Fetch, Report])
    with caller(engine, kind) as (session, bind):
        parent, child = _write(queue, session)
        assert queue.get_job(bind, child).status == "pending"
        assert "waiting_on_parents" in [r.code for r in queue.explain(bind, child).reasons]
        assert [(p.id, p.status) for p in queue.parents(bind, child)] == [(parent, "pending")]
        assert [(s.name, s.payload) for s in queue.signals(bind, child)] == [("approved", {"by": "ann"})]
        assert queue.steps(bind, child) == []
        with pytest.raises(JobNotCompleted) as pending:
            queue.result(bind, parent)
        assert pending.value.status == "pending"
        jobs = models.jobs_table
        session.execute(sa.update(jobs).where(jobs.c.id == parent).values(status="completed",
                                                                         finished_at=sa.func.now()))
        assert queue.result(bind, parent) is None  # completed in this transaction (by hand: no attachment)
        assert bind.in_transaction()  # still open, never committed
        assert _gone(queue, engine, parent, child)
        for read in (queue.steps, queue.signals, queue.parents, queue.explain, queue.result):
            with pytest.raises(JobNotFound):
                read(engine, child)  # the engine's own transaction does not see them
        bind.rollback()
    assert _gone(queue, engine, parent, child)


def test_result_refuses_wait_inside_a_transaction(engine: sa.Engine, models: Any) -> None:
    queue = Queue(models, [Fetch])
    with Session(engine) as session, session.begin():
        job_id = queue.enqueue(session, Fetch()).id
        with pytest.raises(InvalidOption, match=r"result\(wait=...\) waits for a worker's commit, so it takes "
                                                r"an Engine, not a Session"):
            queue.result(session, job_id, wait=1)
        assert session.in_transaction()
        session.rollback()
    assert _gone(queue, engine, job_id)


def test_an_autoflush_session_is_flushed_before_the_read(engine: sa.Engine, models: Any) -> None:
    queue = Queue(models, [Fetch])
    with Session(engine) as session, session.begin():
        job = queue.job(Fetch())
        session.add(job)  # not flushed yet: the read flushes it, as an ORM query would
        assert queue.get_job(session, job.id).kind == "fetch"
        session.rollback()
    assert _gone(queue, engine, job.id)


@pytest.mark.parametrize("kind", ["session", "connection"])
def test_the_async_reads_see_the_async_transactions_writes(engine: sa.Engine, models: Any,
                                                           async_engine: AsyncEngine, kind: str) -> None:
    queue = Queue(models, [Fetch, Report])

    async def reads(bind: AsyncSession | AsyncConnection, parent: str, child: str) -> list[Any]:
        with pytest.raises(JobNotCompleted):
            await queue.result_async(bind, parent)
        with pytest.raises(InvalidOption):
            await queue.result_async(bind, parent, wait=1)
        return [(await queue.get_job_async(bind, child)).status,
                "no_worker" in [r.code for r in (await queue.explain_async(bind, parent)).reasons],
                # asyncpg reads 'infinity' as a naive datetime.max: explain of a waiting job compared it with now
                "waiting_on_parents" in [r.code for r in (await queue.explain_async(bind, child)).reasons],
                [p.id for p in await queue.parents_async(bind, child)],
                [s.name for s in await queue.signals_async(bind, child)],
                await queue.steps_async(bind, child)]

    async def main() -> tuple[list[Any], str, str, bool]:
        async with AsyncSession(async_engine) as session:
            await session.begin()
            parent = (await queue.enqueue_async(session, Fetch())).id
            child = (await queue.enqueue_async(session, Report(), after=[parent])).id
            await queue.signal_async(session, child, "approved")
            bind: AsyncSession | AsyncConnection = session if kind == "session" else await session.connection()
            seen = await reads(bind, parent, child)
            still_open = session.in_transaction()
            await session.rollback()
        return seen, parent, child, still_open

    seen, parent, child, still_open = asyncio.run(main())
    assert seen == ["pending", True, True, [parent], ["approved"], []] and still_open
    assert _gone(queue, engine, parent, child)

