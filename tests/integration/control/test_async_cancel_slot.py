"""Round 3, defect 1: an async handler cut by a cancel, its time limit or a stop keeps its slot (and its kind's
cap) until its coroutine has truly ended, and its outcome is recorded only after that."""

from __future__ import annotations

import asyncio
import threading
from datetime import timedelta
from typing import Any

import sqlalchemy as sa
from support.probes import running, settled
from support.waiting import Events, wait_until
from support.workers import enqueue, job_row

from venturi_sa import JobContext, Queue, Task, Worker

HELD = 1.0  # how long the test watches, with the first handler held in its cleanup, for a wrong start


def capped_cleanup_task(started: list[str], in_cleanup: threading.Event, leave: threading.Event,
                        **policy: Any) -> type[Task]:
    class Cleans(Task):
        KIND = "cleans"
        concurrency = 1
        lease = timedelta(seconds=3)  # renewed each second: a cancel request is read within one

        async def run(self, ctx: JobContext) -> None:
            started.append(ctx.job_id)
            try:
                await asyncio.sleep(60)
            except asyncio.CancelledError:
                in_cleanup.set()
                await asyncio.get_running_loop().run_in_executor(None, leave.wait, 20)
                raise

    for name, value in policy.items():
        setattr(Cleans, name, value)
    return Cleans


# Regression test of round 3's defect 1: failed on 748cf08 (the second job started, and the first job's
# outcome was committed, while the first handler was still in its cleanup).
def test_a_cancelled_async_handler_holds_its_cap_until_its_cleanup_ends(engine: sa.Engine, models: Any) -> None:
    started: list[str] = []
    in_cleanup, leave = threading.Event(), threading.Event()
    queue = Queue(models, [capped_cleanup_task(started, in_cleanup, leave)])
    first, second = enqueue(engine, queue, queue.registry.get("cleans")(), queue.registry.get("cleans")())
    events = Events()
    worker = Worker(queue, engine, concurrency=2, poll_interval=0.2, listen=False, on_event=events)
    with running(worker, now=True):
        try:
            wait_until(lambda: started, what="the first handler to start")
            cancelled = started[0]
            queue.cancel(engine, cancelled, "stop it")
            assert in_cleanup.wait(15), "the cancel did not reach the async handler"
            leave.wait(HELD)  # the cleanup holds: nothing else of the kind may start, nothing may be recorded
            assert started == [cancelled], "a second job of a kind capped at 1 started during the cleanup"
            assert job_row(engine, models, cancelled).status == "claimed", \
                "the cancelled run's outcome was recorded while its handler was still running"
            leave.set()
            assert settled(engine, models, cancelled).status == "dead"
            wait_until(lambda: len(started) == 2, what="the second job to start after the cleanup")
            queue.cancel(engine, started[1])
            settled(engine, models, started[1])
        finally:
            leave.set()
    assert {first, second} == set(started)


# Regression test of round 3's defect 1 (time limit): failed on 748cf08.
def test_an_async_handler_past_its_time_limit_holds_its_cap_until_its_cleanup_ends(
        engine: sa.Engine, models: Any) -> None:
    started: list[str] = []
    in_cleanup, leave = threading.Event(), threading.Event()
    task = capped_cleanup_task(started, in_cleanup, leave, timeout=timedelta(seconds=0.3), max_failures=1)
    queue = Queue(models, [task])
    first, _ = enqueue(engine, queue, task(), task())
    worker = Worker(queue, engine, concurrency=2, poll_interval=0.2, listen=False)
    with running(worker, now=True):
        try:
            assert in_cleanup.wait(15), "the time limit did not reach the async handler"
            timed_out = started[0]
            leave.wait(HELD)
            assert started == [timed_out], "a second job of a kind capped at 1 started during the cleanup"
            assert job_row(engine, models, timed_out).status == "claimed"
            leave.set()
            assert settled(engine, models, timed_out).status == "dead"
        finally:
            leave.set()
    assert first in started
