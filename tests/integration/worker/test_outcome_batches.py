"""Defect 1: one bad outcome must not sink the other outcomes of its batch."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from marshmallow import Schema, fields
from support.probes import running, settled
from support.waiting import Events
from support.workers import enqueue, job_row, journal

from venturi_sa import Complete, JobContext, Queue, Retry, Task, Worker

BATCH = 10


class BadFlag(Schema):
    bad = fields.Boolean(load_default=False)


def bad_outcome(kind: str, ctx: JobContext) -> Any:
    if kind == "retry_int_delay":
        return Retry("x", delay=5)  # an int, not a timedelta
    if kind == "dict_note":
        return Complete(note={"n": 1})  # type: ignore[arg-type]
    if kind == "nul_attachment":
        ctx.set_attachment({"text": "a\u0000b"})
        return Complete()
    if kind == "nul_note":
        return Complete(note="a\x00b")
    raise AssertionError(kind)


# Regression test of defect 1 (worker hardening issue): failed on e53c386.
@pytest.mark.parametrize("bad", ["retry_int_delay", "dict_note", "nul_attachment", "nul_note"])
def test_one_bad_outcome_does_not_sink_its_batch(engine: sa.Engine, models: Any, bad: str) -> None:
    together = threading.Barrier(BATCH, timeout=15)  # all ten return at once: one outcome batch

    class Batch(Task):
        KIND = "batch"
        Payload = BadFlag
        max_failures = 5

        @classmethod
        def backoff(cls, failure_count: int) -> timedelta:
            return timedelta(hours=1)

        def run(self, ctx: JobContext) -> Any:
            together.wait()
            return bad_outcome(bad, ctx) if self.payload["bad"] else Complete("fine")

    queue = Queue(models, [Batch])
    [bad_id, *good] = enqueue(engine, queue, Batch(bad=True), *[Batch() for _ in range(BATCH - 1)])
    events = Events()
    worker = Worker(queue, engine, concurrency=BATCH, poll_interval=0.2, listen=False, on_event=events)
    with running(worker):
        events.wait_count("finished", BATCH)
    for job_id in good:
        row = job_row(engine, models, job_id)
        assert (row.status, row.run_count, row.failure_count) == ("completed", 1, 0), (job_id, row.status)
        assert [(e.run_no, e.outcome) for e in journal(engine, models, job_id)] == [(1, "completed")]
    # the bad run is recorded, never lost: its run 1 has a journal row and the job left 'claimed'
    row = settled(engine, models, bad_id, timeout=2, statuses=("pending", "completed", "dead"))
    entries = journal(engine, models, bad_id)
    assert [e.run_no for e in entries] == [1], [(e.run_no, e.outcome) for e in entries]
    if bad == "retry_int_delay":  # Retry(delay=5) may be rejected at construction: a retryable failure
        assert (entries[0].outcome, row.status, row.failure_count) == ("retried", "pending", 1)
        assert entries[0].note, "the retried run must say what was wrong"
    else:
        assert entries[0].outcome in {"completed", "retried"}, entries[0].outcome
