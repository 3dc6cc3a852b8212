"""Waiting and stopping: NOTIFY wake-ups, polling without LISTEN, graceful shutdown."""

from __future__ import annotations

import threading
import time
from typing import Any

import sqlalchemy as sa
from support.waiting import Events, wait_until
from support.workers import enqueue, job_row, journal, running

from venturi_sa import InvalidOption, JobContext, Queue, Task, Worker


def test_notify_wakes_an_idle_worker_long_before_the_poll_interval(engine: sa.Engine, models: Any) -> None:
    started: dict[str, float] = {}

    class Ping(Task):
        KIND = "ping"

        def run(self, ctx: JobContext) -> None:
            started[ctx.job_id] = time.monotonic()

    queue = Queue(models, [Ping])
    events = Events()
    worker = Worker(queue, engine, poll_interval=30, listen=True, on_event=events)
    with running(worker):
        wait_until(lambda: worker.listener is not None and worker.listener.connected.is_set(), what="LISTEN")
        mark = 0
        for _ in range(3):
            events.wait_for("idle", after=mark)  # asleep: the next poll is 30 s away
            mark = events.mark()
            sent = time.monotonic()
            [job_id] = enqueue(engine, queue, Ping())
            events.wait_for("finished", job_id=job_id, timeout=10)
            assert started[job_id] - sent < 2.0


def test_polling_alone_drains_the_queue(engine: sa.Engine, models: Any) -> None:
    class Ping(Task):
        KIND = "ping"

        def run(self, ctx: JobContext) -> None:
            pass

    queue = Queue(models, [Ping])
    events = Events()
    with running(Worker(queue, engine, poll_interval=0.2, listen=False, on_event=events)) as worker:
        assert worker.listener is None
        events.wait_for("idle")
        ids = enqueue(engine, queue, Ping(), Ping())
        for job_id in ids:
            events.wait_for("finished", job_id=job_id)
    assert [job_row(engine, models, j).status for j in ids] == ["completed", "completed"]


def test_graceful_shutdown_releases_unfinished_jobs(engine: sa.Engine, models: Any) -> None:
    gate = threading.Event()
    started = threading.Semaphore(0)

    class Quick(Task):
        KIND = "quick"

        def run(self, ctx: JobContext) -> None:
            pass

    class Stuck(Task):
        KIND = "stuck"

        def run(self, ctx: JobContext) -> None:
            started.release()
            gate.wait(30)

    queue = Queue(models, [Quick, Stuck])
    stuck = enqueue(engine, queue, Stuck(), Stuck())
    events = Events()
    worker = Worker(queue, engine, concurrency=4, poll_interval=0.2, grace=0.3, on_event=events)
    try:
        with running(worker):
            for _ in stuck:
                assert started.acquire(timeout=20)
            [quick] = enqueue(engine, queue, Quick())
            events.wait_for("finished", job_id=quick)
            stop_at = time.monotonic()
        assert time.monotonic() - stop_at < 10  # run() returned after the grace period
    finally:
        gate.set()
    for job_id in stuck:  # the handlers finish later; their outcome must not land
        events.wait_for("finished", job_id=job_id)
        row = job_row(engine, models, job_id)
        assert (row.status, row.failure_count, row.run_count, row.claimed_by) == ("pending", 0, 1, None)
        [entry] = journal(engine, models, job_id)
        assert (entry.outcome, entry.run_no) == ("released", 1)
    assert job_row(engine, models, quick).status == "completed"


def test_shutdown_waits_for_jobs_that_finish_within_grace(engine: sa.Engine, models: Any) -> None:
    started = threading.Event()

    class Brief(Task):
        KIND = "brief"

        def run(self, ctx: JobContext) -> None:
            started.set()
            time.sleep(0.5)  # the work, shorter than the grace period

    queue = Queue(models, [Brief])
    [job_id] = enqueue(engine, queue, Brief())
    with running(Worker(queue, engine, poll_interval=0.2, grace=15)):
        assert started.wait(20)
    assert job_row(engine, models, job_id).status == "completed"
    assert [e.outcome for e in journal(engine, models, job_id)] == ["completed"]


def test_run_until_idle_returns_when_nothing_is_eligible(engine: sa.Engine, models: Any) -> None:
    class Nothing(Task):
        KIND = "nothing"

        def run(self, ctx: JobContext) -> None:
            pass

    queue = Queue(models, [Nothing])
    assert Worker(queue, engine, poll_interval=30).run_until_idle() == 0


def test_worker_refuses_bad_options_and_unknown_kinds(engine: sa.Engine, models: Any) -> None:
    class One(Task):
        KIND = "one"

    queue = Queue(models, [One])
    for options in ({"concurrency": 0}, {"poll_interval": 0}):
        try:
            Worker(queue, engine, **options)
        except InvalidOption as exc:
            assert next(iter(options)) in str(exc)
        else:
            raise AssertionError(f"{options} accepted")
    try:
        Worker(queue, engine, kinds=["two"])
    except LookupError as exc:
        assert "two" in str(exc)
    else:
        raise AssertionError("unknown kind accepted")
