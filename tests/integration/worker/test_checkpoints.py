"""``ctx.checkpoint`` / ``ctx.progress``: the carry saved mid-run, fenced, read at once, resumed from."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from marshmallow import Schema, fields
from support.hooks import drain
from support.waiting import WAIT, Events
from support.workers import enqueue, job_row, running

from venturi_sa import Complete, JobContext, Queue, Task, Worker
from venturi_sa.errors import InvalidOption, LeaseLost

reached = threading.Event()
proceed = threading.Event()


class Steps(Schema):
    next_step = fields.Integer(required=True)
    progress = fields.Dict()


class Export(Task):
    """Three steps; checkpoints after each; blocks after step 1 until the test says go."""

    KIND = "export"
    Carry = Steps
    seen_starts: list[int] = []

    @classmethod
    def backoff(cls, failure_count: int) -> timedelta:
        return timedelta(0)

    def run(self, ctx: JobContext) -> Any:
        start = ctx.carry["next_step"] if ctx.carry else 0
        Export.seen_starts.append(start)
        for step in range(start, 3):
            ctx.carry = {"next_step": step + 1}
            ctx.progress(step + 1, 3, f"step {step + 1} of 3")
            if step == 0 and not proceed.is_set():
                reached.set()
                proceed.wait(WAIT)
                raise RuntimeError("the worker 'crashed' after step 1")
        return {"steps": 3}


@pytest.fixture(autouse=True)
def _reset() -> None:
    reached.clear()
    proceed.clear()
    Export.seen_starts = []


def test_progress_is_readable_while_the_job_runs_and_the_retry_resumes(engine: sa.Engine, models: Any) -> None:
    queue = Queue(models, [Export])
    [job_id] = enqueue(engine, queue, Export())
    worker = Worker(queue, engine, concurrency=1, poll_interval=0.1)
    with running(worker):
        assert reached.wait(WAIT)
        job = queue.get_job(engine, job_id)  # read from another connection while the handler waits
        assert job.status == "claimed"
        assert job.carry == {"next_step": 1, "progress": {"done": 1, "total": 3, "message": "step 1 of 3"}}
        proceed.set()
    drain(queue, engine)
    assert Export.seen_starts == [0, 1]  # the second run resumed from the checkpoint
    assert queue.result(engine, job_id) == {"steps": 3}
    assert queue.get_job(engine, job_id).carry["next_step"] == 3


def test_a_zombie_checkpoint_writes_nothing_and_raises(engine: sa.Engine, models: Any) -> None:
    released = threading.Event()
    result: list[Any] = []

    class Slow(Task):
        KIND = "slow"

        def run(self, ctx: JobContext) -> Any:
            if ctx.run_count > 1:
                return Complete("the reclaim")
            released.wait(WAIT)  # meanwhile an operator released the job: this run is a zombie
            try:
                ctx.checkpoint({"written": "by a zombie"}, note="should not land")
            except LeaseLost as exc:
                result.append(exc)
                raise
            return Complete()

    queue = Queue(models, [Slow])
    [job_id] = enqueue(engine, queue, Slow())
    events = Events()
    with running(Worker(queue, engine, concurrency=1, poll_interval=0.1, on_event=events)):
        events.wait_for("claimed", job_id=job_id)
        queue.release(engine, job_id, note="operator: worker presumed gone")
        released.set()
        events.wait_for("finished", job_id=job_id)
        worker_outcome = events.of("finished", job_id=job_id)[0][1]
    assert len(result) == 1 and "no longer holds its claim" in str(result[0])
    assert worker_outcome["recorded"] is False
    row = job_row(engine, models, job_id)
    assert row.carry is None  # nothing of the zombie landed


class Plain(Task):
    KIND = "plain"

    def run(self, ctx: JobContext) -> Any:
        ctx.carry = "a string"
        with pytest.raises(InvalidOption, match="ctx.checkpoint"):
            ctx.progress(1, 2)
        with pytest.raises(InvalidOption, match="non-negative"):
            ctx.progress(-1, 2)
        ctx.checkpoint()
        return None


class Strict(Task):
    KIND = "strict"

    class Carry(Schema):
        n = fields.Integer(required=True)

    def run(self, ctx: JobContext) -> Any:
        with pytest.raises(InvalidOption, match="progress = fields.Dict"):
            ctx.progress(1, 2)
        ctx.checkpoint({"n": 5})
        return {"carry": ctx.carry}


def test_bad_progress_is_refused_and_checkpoint_goes_through_the_schema(engine: sa.Engine, models: Any) -> None:
    queue = Queue(models, [Plain, Strict])
    plain, strict = enqueue(engine, queue, Plain(), Strict())
    assert drain(queue, engine) == 2
    assert queue.get_job(engine, plain).carry == "a string"
    assert queue.result(engine, strict) == {"carry": {"n": 5}}
    assert queue.get_job(engine, strict).carry == {"n": 5}
