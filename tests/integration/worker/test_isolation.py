"""Defect 7: the worker's sessions run at READ COMMITTED whatever the engine's default isolation."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import sqlalchemy as sa
from support.probes import running, scalar, side_table, side_write, worker_engine
from support.waiting import Events, wait_until
from support.workers import enqueue, job_row
from support.workers import journal as entries

from venturi_sa import Complete, JobContext, Queue, Task, Worker


# Regression test of defect 7 (worker hardening issue): failed on e53c386.
def test_session_job_outliving_a_lease_renewal_completes_on_a_repeatable_read_engine(
        pg_url: str, engine: sa.Engine, models: Any, prefix: str) -> None:
    side = side_table(engine, prefix)

    class Report(Task):
        KIND = "report"
        lease = timedelta(seconds=2)  # 1 s: the outcome was given up as lease-lost once on a loaded CI cell

        @classmethod
        def backoff(cls, failure_count: int) -> timedelta:
            return timedelta(hours=1)

        def run(self, ctx: JobContext) -> Complete:
            side_write(ctx.session, side, ctx.job_id, ctx.run_count, "report")  # the run's snapshot starts
            first = scalar(engine, "SELECT claim_expires_at FROM " + models.jobs_table.name + " WHERE id = :i",
                           i=ctx.job_id)
            wait_until(lambda: scalar(engine, f"SELECT claim_expires_at FROM {models.jobs_table.name} "
                                              "WHERE id = :i", i=ctx.job_id) > first,
                       timeout=10, what="the worker to renew this run's lease")
            return Complete("report written")

    queue = Queue(models, [Report])
    [job_id] = enqueue(engine, queue, Report())
    events = Events()
    wengine = worker_engine(pg_url, f"hard-{uuid.uuid4().hex[:12]}", isolation_level="REPEATABLE READ")
    try:
        with running(Worker(queue, wengine, poll_interval=0.1, listen=False, on_event=events)):
            events.wait_for("finished", job_id=job_id)
    finally:
        wengine.dispose()
    row = job_row(engine, models, job_id)
    journal = [(e.run_no, e.outcome) for e in entries(engine, models, job_id)]
    notes = [e.note for e in entries(engine, models, job_id)]
    assert (row.status, journal) == ("completed", [(1, "completed")]), (row.status, journal, notes)
    assert scalar(engine, f"SELECT count(*) FROM {side}") == 1
