"""Defect 15: a failed run whose ctx.session connection died is still recorded as ``retried``."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import sqlalchemy as sa
from support.probes import running, scalar, settled
from support.waiting import Events, wait_until
from support.workers import enqueue, journal

from venturi_sa import JobContext, Queue, Task, Worker


# Regression test of defect 15 (worker hardening issue): failed on e53c386.
def test_failed_run_with_a_terminated_session_is_recorded(engine: sa.Engine, models: Any) -> None:
    class Doomed(Task):
        KIND = "doomed"

        @classmethod
        def backoff(cls, failure_count: int) -> timedelta:
            return timedelta(hours=1)

        def run(self, ctx: JobContext) -> None:
            pid = ctx.session.execute(sa.text("SELECT pg_backend_pid()")).scalar_one()
            assert scalar(engine, "SELECT pg_terminate_backend(:p)", p=pid)
            wait_until(lambda: not scalar(engine, "SELECT count(*) FROM pg_stat_activity WHERE pid = :p", p=pid),
                       what="the run's backend to be gone")
            raise RuntimeError("boom-15: the upstream refused")

    queue = Queue(models, [Doomed])
    [job_id] = enqueue(engine, queue, Doomed())
    events = Events()
    with running(Worker(queue, engine, poll_interval=0.1, listen=False, on_event=events)):
        events.wait_for("finished", job_id=job_id)
        row = settled(engine, models, job_id, timeout=3, statuses=("pending", "dead"))
    entries = journal(engine, models, job_id)
    assert (row.status, row.failure_count, [e.outcome for e in entries]) == ("pending", 1, ["retried"])
    assert "boom-15" in (entries[0].note or ""), entries[0].note
