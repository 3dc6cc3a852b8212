"""``Task.timeout`` and an enqueue's ``timeout=``: past it a run is cancelled cooperatively (async: its task
too) and fails, retryably; the enqueue's limit, stored per job, overrides the task's."""

from __future__ import annotations

import asyncio
import logging
import re
import threading
from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.orm import Session
from support.queues import side_rows, side_table, side_write
from support.waiting import WAIT, wait_until
from support.workers import enqueue, job_row, journal

from venturi_sa import JobContext, Queue, Task, Worker
from venturi_sa.errors import InvalidOption

pytestmark = pytest.mark.timeout(60)
LIMIT = timedelta(seconds=0.5)


def run_one(queue: Queue, engine: sa.Engine) -> None:
    Worker(queue, engine, concurrency=1, poll_interval=0.2).run_until_idle()


def assert_timed_out(engine: sa.Engine, models: Any, job_id: str, source: str = "Task.timeout") -> None:
    row = job_row(engine, models, job_id)
    assert (row.status, row.failure_count) == ("pending", 1)  # retried after its backoff
    [entry] = journal(engine, models, job_id)
    assert entry.outcome == "retried" and entry.note.startswith(f"timed out after 0.5s ({source})")


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
    with pytest.raises(InvalidOption, match="timeout must be None or a positive timedelta"):
        type("Bad", (Task,), {"KIND": "bad", "timeout": 5})


def waiting_task(kind: str, limit: timedelta | None, wait: float = WAIT) -> type[Task]:
    """A sync task with ``Task.timeout = limit`` that waits (up to ``wait``) for a cancel, then honours it."""

    def run(self: Task, ctx: JobContext) -> None:
        ctx.wait_cancelled(wait)
        ctx.raise_if_cancelled()

    return type(f"Wait_{kind}", (Task,), {"KIND": kind, "timeout": limit, "run": run})


def test_an_enqueue_timeout_overrides_the_task_timeout(engine: sa.Engine, models: Any) -> None:
    """Shorter than none at all (the task has no limit), and longer than the task's own."""
    unlimited, limited = waiting_task("unlimited", None), waiting_task("limited", LIMIT, wait=1.5)
    queue = Queue(models, [unlimited, limited])
    [cut] = enqueue(engine, queue, unlimited(), timeout=LIMIT)
    [spared] = enqueue(engine, queue, limited(), timeout=timedelta(minutes=5))
    run_one(queue, engine)
    assert_timed_out(engine, models, cut, source="enqueue timeout")
    assert job_row(engine, models, spared).status == "completed"  # ran 1.5 s: past Task.timeout, within its own


def test_the_limit_rides_with_queue_job_and_shows_in_get_job_and_explain(engine: sa.Engine, models: Any) -> None:
    task_type = waiting_task("shown", None)
    queue = Queue(models, [task_type])
    with Session(engine) as session, session.begin():
        job = queue.job(task_type(), timeout=timedelta(seconds=30))
        session.add(job)
        session.flush()
        job_id = job.id
    [plain] = enqueue(engine, queue, task_type())
    assert queue.get_job(engine, job_id).timeout == timedelta(seconds=30)
    assert queue.get_job(engine, job_id).as_dict()["timeout"] == 30.0
    assert queue.get_job(engine, plain).timeout is None
    why = queue.explain(engine, job_id)
    assert why.timeout == timedelta(seconds=30) and why.as_dict()["timeout"] == 30.0
    assert "time limit: 30s (set at enqueue; overrides Task.timeout)" in str(why)
    assert "time limit" not in str(queue.explain(engine, plain))


def test_a_bad_timeout_is_refused_and_nothing_is_written(engine: sa.Engine, models: Any) -> None:
    task_type = waiting_task("refused", None)
    queue = Queue(models, [task_type], check_added_jobs=True)
    for bad in (5, timedelta(0), timedelta(seconds=-1), "1m"):
        with Session(engine) as session, session.begin():
            refused = re.escape(f"timeout must be None or a positive timedelta, got {bad!r}")
            with pytest.raises(InvalidOption, match=refused):
                queue.enqueue(session, task_type(), timeout=bad)  # type: ignore[arg-type]
            with pytest.raises(InvalidOption, match="timeout must be None or a positive timedelta"):
                queue.job(task_type(), timeout=bad)  # type: ignore[arg-type]
    with Session(engine) as session, session.begin():  # a Job built by hand is checked at flush
        session.add(models.Job(kind="refused", payload={}, time_limit=models.JobTimeout(timeout=timedelta(0))))
        with pytest.raises(InvalidOption, match="time_limit.timeout must be None or a positive timedelta"):
            session.flush()
        session.rollback()
    with engine.connect() as conn:
        for table in (models.jobs_table, models.timeouts_table):
            assert conn.execute(sa.select(sa.func.count()).select_from(table)).scalar_one() == 0
