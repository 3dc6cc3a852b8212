"""A run's whole lifecycle (decide, persist, release the slot) on the memory backend.

Each handler's result or exception ends in the outcome the executor
classifies, written fenced with its journal row; a cancel delivered by the
lease keeper's renewal replaces a retry with ``dead``.  Handlers that use
``ctx.session`` (or a task with outcome hooks, which run in that session)
need a real engine and are covered by tests/integration.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from marshmallow import Schema, fields
from support.memory_parts import Parts

from venturi_sa import Complete, Die, JobContext, Pause, Retry, Task
from venturi_sa.worker.cancel import deliver_cancel


class Job(Task):
    KIND = "job"
    max_failures = 3

    class Payload(Schema):
        result = fields.String(required=True)

    @classmethod
    def backoff(cls, failure_count: int) -> timedelta:
        return timedelta(seconds=10 * failure_count)

    def run(self, ctx: JobContext) -> Any:
        ctx.carry = {"step": (ctx.carry or {"step": 0})["step"] + 1}
        result = self.payload["result"]
        if result == "raise":
            raise RuntimeError("kaput")
        if result == "checkpoint":
            ctx.checkpoint({"step": 41})
            return None
        return {"none": lambda: None, "complete": lambda: Complete("ok"), "die": lambda: Die("no"),
                "retry": lambda: Retry("again"), "pause": lambda: Pause(delay=timedelta(seconds=5), note="later"),
                "value": lambda: {"sent": (1, 2)}}[result]()


@pytest.mark.parametrize(("result", "status", "outcome", "failures"), [
    ("none", "completed", "completed", 0), ("complete", "completed", "completed", 0), ("die", "dead", "dead", 0),
    ("retry", "pending", "retried", 1), ("raise", "pending", "retried", 1), ("pause", "pending", "paused", 0),
])
def test_each_result_is_recorded_as_its_outcome(result: str, status: str, outcome: str, failures: int) -> None:
    parts = Parts([Job])
    job_id = parts.store.add("job", {"result": result})
    [run] = parts.claim_and_run()
    job = parts.store.jobs[job_id]
    assert (job.status, job.failure_count, job.claimed_by) == (status, failures, None)
    assert parts.store.journal_of(job_id) == [(1, outcome)]
    assert parts.finished == [(run, True)] and parts.inflight.free() == 4 and len(parts.inflight) == 0


def test_a_retry_waits_its_backoff_and_a_pause_keeps_its_carry() -> None:
    parts = Parts([Job])
    retried, paused = parts.store.add("job", {"result": "raise"}), parts.store.add("job", {"result": "pause"})
    parts.claim_and_run()
    assert parts.store.jobs[retried].visible_at == parts.clock.now + timedelta(seconds=10)
    assert parts.store.journal[0].note == "RuntimeError: kaput"
    assert parts.store.jobs[paused].carry == {"step": 1}
    assert parts.store.jobs[paused].visible_at == parts.clock.now + timedelta(seconds=5)


def test_a_result_is_stored_as_json_gives_it_back() -> None:
    parts = Parts([Job])
    job_id = parts.store.add("job", {"result": "value"})
    parts.claim_and_run()
    [entry] = parts.store.journal
    assert entry.job_id == job_id and entry.attachment == {"sent": [1, 2]}


def test_the_backstop_ends_a_job_dead_after_max_failures() -> None:
    parts = Parts([Job])
    job_id = parts.store.add("job", {"result": "raise"})
    for _ in range(3):
        parts.claim_and_run()
        parts.clock.advance(minutes=1)
    assert parts.store.jobs[job_id].status == "dead" and parts.store.jobs[job_id].failure_count == 3
    assert [o for _, o in parts.store.journal_of(job_id)] == ["retried", "retried", "dead"]


def test_a_checkpoint_is_written_fenced_while_the_run_holds_its_claim() -> None:
    parts = Parts([Job])
    job_id = parts.store.add("job", {"result": "checkpoint"})
    parts.producer.claim_round()
    [run] = parts.dispatched
    parts.pipeline.handle(run)
    assert parts.store.jobs[job_id].carry == {"step": 41} and parts.store.jobs[job_id].status == "completed"


def test_a_delivered_cancel_ends_the_run_dead_before_its_handler_runs() -> None:
    parts = Parts([Job])
    job_id = parts.store.add("job", {"result": "retry"})
    parts.producer.claim_round()
    [run] = parts.dispatched
    deliver_cancel(run, "cancelled by ops while running")
    parts.pipeline.handle(run)
    assert parts.store.jobs[job_id].status == "dead"
    assert parts.store.journal[0].note is not None and parts.store.journal[0].note.startswith("cancelled by ops")


def test_a_stored_cancel_request_turns_a_retry_into_dead_with_on_dead_owed() -> None:
    parts = Parts([Job])
    job_id = parts.store.add("job", {"result": "retry"})
    parts.producer.claim_round()
    parts.store.request_cancel(job_id, "ops")  # stored after the claim, never delivered to the run
    parts.pipeline.handle(parts.dispatched[0])
    assert parts.store.jobs[job_id].status == "dead" and [o.job_id for o in parts.store.owed] == [job_id]
    assert parts.store.cancels == {}
