"""A handler's returned JSON value is the job's result, read back with ``queue.result(...)``."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
import sqlalchemy as sa
from marshmallow import Schema, fields
from sqlalchemy.ext.asyncio import AsyncEngine
from support.async_engines import async_engine_fixture  # noqa: F401 - the async_engine fixture
from support.queues import drain
from support.waiting import WAIT
from support.workers import enqueue, job_row, journal, running

from venturi_sa import Die, JobContext, JobNotCompleted, JobNotFound, Queue, Task, Worker
from venturi_sa.errors import InvalidOption
from venturi_sa.ops import history

MISSING = "01J00000000000000000000000"


class Terms(Schema):
    a = fields.Integer(required=True)
    b = fields.Integer(required=True)


class Add(Task):
    KIND = "add"
    Payload = Terms

    def run(self, ctx: JobContext) -> Any:
        ctx.set_attachment({"evidence": "replaced by the result"})
        return {"sum": self.payload["a"] + self.payload["b"]}


class Hopeless(Task):
    KIND = "hopeless"

    def run(self, ctx: JobContext) -> Die:
        return Die("no such customer")


class Sloppy(Task):
    KIND = "sloppy"
    max_failures = 1

    def run(self, ctx: JobContext) -> Any:
        return {"when": {1, 2}}


@pytest.fixture
def queue(models: Any) -> Queue:
    return Queue(models, [Add, Hopeless, Sloppy])


def test_the_result_is_what_the_handler_returned(engine: sa.Engine, models: Any, queue: Queue) -> None:
    [job_id] = enqueue(engine, queue, Add(a=1, b=2))
    drain(queue, engine)
    assert queue.result(engine, job_id) == {"sum": 3}
    [entry] = journal(engine, models, job_id)
    assert (entry.outcome, entry.attachment) == ("completed", {"sum": 3})


def test_a_result_json_cannot_store_completes_the_job_without_it(engine: sa.Engine, models: Any,
                                                                  queue: Queue) -> None:
    [job_id] = enqueue(engine, queue, Sloppy())
    drain(queue, engine)
    [entry] = journal(engine, models, job_id)  # one run: never retried
    assert entry.outcome == "completed"
    assert "(the job's result) is not JSON-serializable at when: set is not JSON" in entry.note
    assert queue.result(engine, job_id) is None


def test_no_result_for_a_missing_pending_or_dead_job(engine: sa.Engine, queue: Queue) -> None:
    with pytest.raises(JobNotFound, match=MISSING):
        queue.result(engine, MISSING)
    [pending] = enqueue(engine, queue, Add(a=1, b=1))
    with pytest.raises(JobNotCompleted, match=r"is pending, not completed: it has no result yet \(pass wait="):
        queue.result(engine, pending)
    [dead] = enqueue(engine, queue, Hopeless())
    drain(queue, engine, kinds=["hopeless"])
    with pytest.raises(JobNotCompleted, match="is dead"):
        queue.result(engine, dead, wait=WAIT)  # dead never completes: no waiting
    with pytest.raises(InvalidOption, match="wait"):
        queue.result(engine, pending, wait=-1)


def test_wait_returns_once_a_worker_completes_the_job(engine: sa.Engine, models: Any, queue: Queue,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    [job_id] = enqueue(engine, queue, Add(a=20, b=22))
    first_read = threading.Event()
    read = history.result_state

    def watched(*args: Any) -> Any:
        state = read(*args)
        first_read.set()
        return state

    monkeypatch.setattr(history, "result_state", watched)
    got: list[Any] = []
    waiter = threading.Thread(target=lambda: got.append(queue.result(engine, job_id, wait=WAIT)))
    waiter.start()
    assert first_read.wait(WAIT)  # the waiter saw the job pending before any worker ran
    with running(Worker(queue, engine, poll_interval=0.2)):
        waiter.join(WAIT)
    assert got == [{"sum": 42}] and job_row(engine, models, job_id).status == "completed"


def test_wait_times_out(engine: sa.Engine, queue: Queue) -> None:
    [job_id] = enqueue(engine, queue, Add(a=1, b=1))
    with pytest.raises(TimeoutError, match="is still pending after 0.2s"):
        queue.result(engine, job_id, wait=0.2)


def test_result_async(engine: sa.Engine, async_engine: AsyncEngine, queue: Queue) -> None:
    [done] = enqueue(engine, queue, Add(a=2, b=3))
    drain(queue, engine, kinds=["add"])
    [pending] = enqueue(engine, queue, Add(a=0, b=0))
    assert asyncio.run(queue.result_async(async_engine, done)) == {"sum": 5}
    with pytest.raises(TimeoutError, match="still pending"):
        asyncio.run(queue.result_async(async_engine, pending, wait=0.1))
    with pytest.raises(JobNotFound):
        asyncio.run(queue.result_async(async_engine, MISSING, wait=0.1))
