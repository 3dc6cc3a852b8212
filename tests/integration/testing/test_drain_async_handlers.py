"""``async def`` handlers under the test helpers: ``ctx.session_async`` is the test's AsyncSession, in a savepoint."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import sqlalchemy as sa
from support.notes import NOTES, BodySchema, notes

from venturi_sa import JobContext, Models, Queue, Task
from venturi_sa.errors import InvalidOption
from venturi_sa.states import Outcome
from venturi_sa.testing import (
    drain,
    drain_async,
    inline,
    perform,
    perform_async,
    refute_enqueued_async,
    rolled_back_async_session,
    rolled_back_session,
)

pytest.importorskip("asyncpg")
pytest.importorskip("greenlet")


class Boom(Exception):
    pass


def async_queue(models: Models) -> Queue:
    queue = Queue(models)

    @queue.register
    class AsyncNote(Task):
        KIND = "async_note"
        Payload = BodySchema

        async def run(self, ctx: JobContext) -> Any:
            session = ctx.session_async
            await session.execute(sa.insert(NOTES).values(body=self.payload["body"], run_no=ctx.run_count))
            await asyncio.sleep(0)  # a real suspension on the test's loop
            if self.payload["body"] == "boom":
                raise Boom("after writing")
            return {"seen": (await session.execute(sa.select(sa.func.count()).select_from(NOTES))).scalar_one()}

    return queue


def in_async_session(pg_url: str, scenario: Callable[[Any], Awaitable[None]]) -> None:
    from sqlalchemy.ext.asyncio import create_async_engine

    async def main() -> None:
        engine = create_async_engine(sa.make_url(pg_url).set(drivername="postgresql+asyncpg"))
        try:
            async with rolled_back_async_session(engine) as session:
                await scenario(session)
        finally:
            await engine.dispose()

    asyncio.run(main())


def test_drain_async_runs_the_handler_in_the_tests_transaction(no_rows_left: None, pg_url: str,
                                                                models: Models) -> None:
    queue = async_queue(models)
    task = queue.registry.get("async_note")

    async def scenario(session: Any) -> None:
        await queue.enqueue_async(session, task(body="kept"))
        result = await drain_async(session, queue)
        assert (result.completed, result.total) == (1, 1)
        assert await session.run_sync(notes) == ["kept"]  # the handler's write, visible in the test
        [job] = await session.run_sync(lambda s: list(s.scalars(sa.select(models.Job))))
        assert job.status == "completed"
        await refute_enqueued_async(session, queue)

    in_async_session(pg_url, scenario)


def test_a_failing_async_handler_raises_or_is_retried_with_its_work_rolled_back(
        no_rows_left: None, pg_url: str, models: Models) -> None:
    queue = async_queue(models)
    task = queue.registry.get("async_note")

    async def scenario(session: Any) -> None:
        await queue.enqueue_async(session, task(body="boom"))
        with pytest.raises(Boom, match="after writing"):
            await drain_async(session, queue)
        assert await session.run_sync(notes) == []  # its savepoint was rolled back
        result = await drain_async(session, queue, fail_fast=False)
        assert result.retried == 1 and result.runs[0].note == "Boom: after writing"
        assert await session.run_sync(notes) == []

    in_async_session(pg_url, scenario)


def test_sync_drain_names_drain_async_and_leaves_the_job_pending(no_rows_left: None, engine: sa.Engine,
                                                                 models: Models) -> None:
    queue = async_queue(models)
    with rolled_back_session(engine) as session:
        queue.enqueue(session, queue.registry.get("async_note")(body="x"))
        with pytest.raises(InvalidOption) as err:
            drain(session, queue)
        assert str(err.value) == ("job kind 'async_note' has an async def handler: run it with "
                                  "`await drain_async(async_session, queue)`")
        assert session.scalars(sa.select(models.Job.status)).all() == ["pending"]


def test_perform_async_joins_the_tests_async_session(no_rows_left: None, pg_url: str, models: Models) -> None:
    queue = async_queue(models)
    task = queue.registry.get("async_note")

    async def scenario(session: Any) -> None:
        done = await perform_async(task(body="performed"), session=session)
        assert (done.outcome, done.attachment) == (Outcome.COMPLETED, {"seen": 1})
        assert await session.run_sync(notes) == ["performed"]
        with pytest.raises(Boom):
            await perform_async(task(body="boom"), session=session)
        assert await session.run_sync(notes) == ["performed"]  # the failed run's write rolled back

    in_async_session(pg_url, scenario)


def test_sync_perform_of_an_async_handler_names_perform_async(models: Models) -> None:
    task = async_queue(models).registry.get("async_note")
    with pytest.raises(InvalidOption, match=r"use `await perform_async\(task, session=async_session\)`"):
        perform(task(body="x"))


def test_inline_runs_an_async_handler_enqueued_through_enqueue_async(no_rows_left: None, pg_url: str,
                                                                      models: Models) -> None:
    queue = async_queue(models)

    async def scenario(session: Any) -> None:
        with inline(queue) as runner:
            await queue.enqueue_async(session, queue.registry.get("async_note")(body="inline"))
        assert [r.outcome for r in runner.runs] == [Outcome.COMPLETED]
        assert await session.run_sync(notes) == ["inline"]

    in_async_session(pg_url, scenario)


def test_an_async_handler_checkpoints_in_the_tests_transaction(no_rows_left: None, pg_url: str,
                                                                models: Models) -> None:
    queue = Queue(models)
    jobs = models.jobs_table

    @queue.register
    class Steps(Task):
        KIND = "steps"

        async def run(self, ctx: JobContext) -> Any:
            await ctx.checkpoint_async({"step": 1})
            stored = await ctx.session_async.execute(sa.select(jobs.c.carry).where(jobs.c.id == ctx.job_id))
            return {"stored": stored.scalar_one()}

    async def scenario(session: Any) -> None:
        job = await queue.enqueue_async(session, Steps())
        job_id = job.id
        result = await drain_async(session, queue)
        assert result.completed == 1
        journal = models.journal_table
        attachment = await session.scalar(sa.select(journal.c.attachment).where(journal.c.job_id == job_id))
        assert attachment == {"stored": {"step": 1}}  # the checkpoint was written in the test's transaction

    in_async_session(pg_url, scenario)


def test_a_sync_checkpoint_in_an_async_handler_names_checkpoint_async(pg_url: str, models: Models) -> None:
    queue = Queue(models)

    @queue.register
    class Blocking(Task):
        KIND = "blocking"

        async def run(self, ctx: JobContext) -> None:
            ctx.checkpoint({"step": 1})

    async def scenario(session: Any) -> None:
        await queue.enqueue_async(session, Blocking())
        with pytest.raises(InvalidOption, match=r"`await ctx.checkpoint_async\(...\)`"):
            await drain_async(session, queue)

    in_async_session(pg_url, scenario)


def test_drain_async_wraps_an_async_handler_in_the_queues_run_hooks(no_rows_left: None, pg_url: str,
                                                                    models: Models) -> None:
    """The helpers run the worker's own pipeline for async handlers too: ``around_run`` (tracing's span) included."""
    from collections.abc import Iterator
    from contextlib import contextmanager

    from venturi_sa.run_hooks import RunHooks
    from venturi_sa.worker.joblog import current_job

    queue = async_queue(models)
    task = queue.registry.get("async_note")
    seen: list[tuple[str, str]] = []

    @contextmanager
    def around(ctx: JobContext) -> Iterator[None]:
        seen.append(("enter", ctx.job_id))
        yield
        seen.append(("exit", ctx.job_id))

    queue.run_hooks = queue.run_hooks + RunHooks.of(around_run=around)

    async def scenario(session: Any) -> None:
        job_id = (await queue.enqueue_async(session, task(body="traced"))).id
        await drain_async(session, queue)
        assert seen == [("enter", job_id), ("exit", job_id)]

    in_async_session(pg_url, scenario)
    assert current_job.get(None) is None  # the run's log context did not leak into the test
