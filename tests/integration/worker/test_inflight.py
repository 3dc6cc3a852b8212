"""Defect 4: a job in flight twice in one worker (release, then reclaim) keeps the new run's lease."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import sqlalchemy as sa
from support.probes import outcomes, running, scalar
from support.waiting import Events, wait_until
from support.workers import enqueue, job_row

from venturi_sa import Complete, JobContext, Queue, Task, Worker


# Regression test of defect 4 (worker hardening issue): failed on e53c386.
def test_reclaimed_run_keeps_its_lease_after_the_earlier_run_returns(engine: sa.Engine, models: Any,
                                                                     prefix: str) -> None:
    gates = {1: threading.Event(), 2: threading.Event()}
    started = {1: threading.Event(), 2: threading.Event()}

    class Held(Task):
        KIND = "held"
        lease = timedelta(seconds=1)
        max_failures = 10

        def run(self, ctx: JobContext) -> Complete:
            started[ctx.run_count].set()
            gates[ctx.run_count].wait(20)
            return Complete(f"run {ctx.run_count}")

    queue = Queue(models, [Held])
    [job_id] = enqueue(engine, queue, Held())
    events = Events()
    worker = Worker(queue, engine, concurrency=2, poll_interval=0.1, listen=False, recover_interval=0.1,
                    on_event=events)
    try:
        with running(worker):
            assert started[1].wait(10)
            queue.release(engine, job_id, "operator: looks stuck")  # run 1 is still running
            assert started[2].wait(10), "the worker did not reclaim the released job"
            gates[1].set()  # run 1 returns: its outcome is fenced out (run 2 holds the claim)
            wait_until(lambda: events.of("finished", job_id=job_id), what="run 1 to finish")
            # run 2 is healthy: its 1 s lease must keep being renewed for several lease periods
            now = scalar(engine, "SELECT now()")

            def renewed_past() -> bool:
                row = job_row(engine, models, job_id)
                assert (row.status, row.run_count) == ("claimed", 2), (
                    f"run 2 lost its claim while running: status {row.status}, run_count {row.run_count}, "
                    f"journal {outcomes(engine, models, job_id)}")
                return bool(row.claim_expires_at > now + timedelta(seconds=3.5))

            wait_until(renewed_past, timeout=10, what="run 2's lease to be renewed 3 s ahead")
            gates[2].set()
            wait_until(lambda: job_row(engine, models, job_id).status == "completed", what="run 2 to complete")
    finally:
        for gate in gates.values():
            gate.set()
    assert [o for _, o in outcomes(engine, models, job_id)] == ["released", "completed"]
    assert job_row(engine, models, job_id).failure_count == 0
