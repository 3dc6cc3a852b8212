"""``Task.timeout``: past it a run is cancelled cooperatively (async: its task too) and fails, retryably."""

from __future__ import annotations

import asyncio
import logging
import threading
from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from queue_kit import side_rows, side_table, side_write, wait_until
from worker_kit import WAIT, enqueue, job_row, journal

from venturi_sa import JobContext, Queue, Task, Worker

pytestmark = pytest.mark.timeout(60)
LIMIT = timedelta(seconds=0.5)


def run_one(queue: Queue, engine: sa.Engine) -> None:
    Worker(queue, engine, concurrency=1, poll_interval=0.2).run_until_idle()


def assert_timed_out(engine: sa.Engine, models: Any, job_id: str) -> None:
    row = job_row(engine, models, job_id)
    assert (row.status, row.failure_count) == ("pending", 1)  # retried after its backoff
    [entry] = journal(engine, models, job_id)
    assert entry.outcome == "retried" and entry.note.startswith("timed out after 0.5s (Task.timeout)")


def test_an_async_handler_past_its_timeout_is_cancelled(engine: sa.Engine, models: Any, prefix: str) -> None:
    table = side_table(engine, prefix)
    cancelled = threading.Event()

    class Slow(Task):
        KIND = "slow"
        timeout = LIMIT

        async def run(self, ctx: JobContext) -> None:
            try:
                await ctx.session_async.execute(sa.text(f"INSERT INTO {table} (job_id, run_no) VALUES (:j, 1)"),
                                                {"j": ctx.job_id})
                await asyncio.sleep(WAIT)
            except asyncio.CancelledError:
                cancelled.set()
                raise

    queue = Queue(models, [Slow])
    [job_id] = enqueue(engine, queue, Slow())
    run_one(queue, engine)
    assert cancelled.wait(WAIT)  # the task unwinds on the loop, just after the run's outcome
    assert_timed_out(engine, models, job_id)
    assert side_rows(engine, table) == []


def test_a_sync_handler_sees_ctx_cancelled_at_its_timeout(engine: sa.Engine, models: Any, prefix: str) -> None:
    table = side_table(engine, prefix)

    class Loop(Task):
        KIND = "loop"
        timeout = LIMIT

        def run(self, ctx: JobContext) -> None:
            side_write(ctx.session, table, ctx.job_id, ctx.run_count)
            assert ctx.wait_cancelled(WAIT)
            ctx.raise_if_cancelled()

    queue = Queue(models, [Loop])
    [job_id] = enqueue(engine, queue, Loop())
    run_one(queue, engine)
    assert_timed_out(engine, models, job_id)
    assert side_rows(engine, table) == []


def test_a_sync_handler_that_ignores_its_timeout_is_reported_then_fails(
        engine: sa.Engine, models: Any, caplog: pytest.LogCaptureFixture) -> None:
    gate = threading.Event()

    class Stubborn(Task):
        KIND = "stubborn"
        timeout = LIMIT

        def run(self, ctx: JobContext) -> None:
            assert gate.wait(WAIT)  # ignores ctx.cancelled; returns "successfully" once let go

    queue = Queue(models, [Stubborn])
    [job_id] = enqueue(engine, queue, Stubborn())
    caplog.set_level(logging.WARNING, logger="venturi_sa")
    worker = threading.Thread(target=run_one, args=(queue, engine))
    worker.start()
    wait_until(lambda: any("cannot be interrupted" in r.getMessage() for r in caplog.records),
               what="the timeout report")
    gate.set()
    worker.join(WAIT)
    assert_timed_out(engine, models, job_id)


def test_timeout_must_be_a_positive_timedelta() -> None:
    from venturi_sa.errors import InvalidOption

    with pytest.raises(InvalidOption, match="timeout must be None or a positive timedelta"):
        type("Bad", (Task,), {"KIND": "bad", "timeout": 5})
