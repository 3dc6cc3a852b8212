"""Lease loss seen by the handler: ``ctx.lease_lost`` is set, the run's outcome is not written, logged once."""

from __future__ import annotations

import logging
import threading
import time
from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from support.control import watched
from support.queues import side_rows, side_table, side_write
from support.waiting import WAIT
from support.workers import enqueue, journal

from venturi_sa import JobContext, Queue, Task

pytestmark = pytest.mark.timeout(60)


def test_a_released_run_learns_it_lost_its_lease(engine: sa.Engine, models: Any, prefix: str,
                                                 caplog: pytest.LogCaptureFixture) -> None:
    table = side_table(engine, prefix)
    started, lost = threading.Event(), threading.Event()

    class Long(Task):
        KIND = "long"
        lease = timedelta(seconds=3)

        def run(self, ctx: JobContext) -> None:
            side_write(ctx.session, table, ctx.job_id, ctx.run_count)
            if ctx.run_count > 1:
                return
            started.set()
            deadline = time.monotonic() + WAIT
            while not ctx.lease_lost and time.monotonic() < deadline:
                time.sleep(0.02)  # the handler's own cooperative check
            if ctx.lease_lost:
                lost.set()

    queue = Queue(models, [Long])
    caplog.set_level(logging.WARNING, logger="venturi_sa.worker")
    with watched(queue, engine, concurrency=2) as events:
        [job_id] = enqueue(engine, queue, Long())
        assert started.wait(WAIT)
        queue.release(engine, job_id, "worker looked stuck", actor="ops")  # the claim is gone
        assert lost.wait(WAIT)
        events.wait_for("finished", job_id=job_id, recorded=True)  # run 2 (the reclaim) completes
    assert [(e.outcome, e.run_no) for e in journal(engine, models, job_id)] == [("released", 1), ("completed", 2)]
    assert [r.run_no for r in side_rows(engine, table)] == [2]  # run 1's session work was rolled back
    lost_lines = [r for r in caplog.records if "lease lost" in r.getMessage() and "run 1" in r.getMessage()]
    assert len(lost_lines) == 1
