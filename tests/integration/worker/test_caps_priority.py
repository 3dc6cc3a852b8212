"""Defect 2: a capped kind must not starve behind a backlog of an uncapped kind."""

from __future__ import annotations

import threading
from typing import Any

import sqlalchemy as sa
from support.probes import running
from support.waiting import Events
from support.workers import enqueue

from venturi_sa import JobContext, Priority, Queue, Task, Worker

LOW_BACKLOG = 200


# Regression test of defect 2 (worker hardening issue): failed on e53c386.
def test_capped_high_jobs_start_before_the_uncapped_low_backlog(engine: sa.Engine, models: Any) -> None:
    # The LOW jobs are long: they run until the test opens the gate (or for two minutes), so a
    # starved HIGH job could not start within the wait below, however slow the machine.
    gate = threading.Event()

    class Bulk(Task):
        KIND = "bulk"
        priority = Priority.LOW

        def run(self, ctx: JobContext) -> None:
            gate.wait(120)

    class Urgent(Task):
        KIND = "urgent"
        priority = Priority.HIGH
        concurrency = 5

        def run(self, ctx: JobContext) -> None:
            pass

    queue = Queue(models, [Bulk, Urgent])
    enqueue(engine, queue, *[Bulk() for _ in range(LOW_BACKLOG)])
    urgent = enqueue(engine, queue, *[Urgent() for _ in range(5)])
    events = Events()
    worker = Worker(queue, engine, concurrency=10, poll_interval=0.2, listen=False, on_event=events)
    try:
        with running(worker):
            try:
                for job_id in urgent:  # HIGH first: they must not wait for the LOW backlog to drain
                    events.wait_for("finished", job_id=job_id, timeout=60)
            except AssertionError:
                claimed = [d["kind"] for _, d in events.of("claimed")]
                raise AssertionError(
                    f"the 5 HIGH jobs (cap 5) did not run while the LOW backlog held the slots; "
                    f"claims so far: {claimed.count('bulk')} bulk, {claimed.count('urgent')} urgent") from None
            finally:
                gate.set()
            events.wait_count("finished", LOW_BACKLOG + 5)
    finally:
        gate.set()
    order = [d["kind"] for _, d in events.of("claimed")]
    assert order.count("urgent") == 5 and order.count("bulk") == LOW_BACKLOG
    assert max(i for i, k in enumerate(order) if k == "urgent") < 10  # among the first claims
