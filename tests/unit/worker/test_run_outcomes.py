"""Classifying what a handler returns or raises, without a database."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from marshmallow import Schema, fields

from venturi_sa import Complete, Die, Outcome, Pause, Retry, Task
from venturi_sa.storage.params import ClaimedJob
from venturi_sa.task import Registry
from venturi_sa.worker.context import JobContext  # the worker's class: these tests build one
from venturi_sa.worker.pipeline import decide as process
from venturi_sa.worker.pipeline_stages import classify
from venturi_sa.worker.run import Run


class Steps(Schema):
    step = fields.Integer(required=True)


class Job(Task):
    KIND = "job"
    Carry = Steps
    max_failures = 3

    class Payload(Schema):
        result = fields.Raw(load_default=None)

    @classmethod
    def backoff(cls, failure_count: int) -> timedelta:
        return timedelta(seconds=10 * failure_count)

    def run(self, ctx: JobContext) -> Any:
        ctx.carry = {"step": (ctx.carry or {"step": 0})["step"] + 1}
        result = self.payload["result"]
        if result == "raise":
            raise RuntimeError("kaput")
        return {"none": lambda: None, "complete": lambda: Complete("ok"), "die": lambda: Die("no"),
                "retry": lambda: Retry("again"), "pause": lambda: Pause(delay=timedelta(seconds=5), note="later"),
                "junk": lambda: "junk", "set": lambda: {"a"},
                "naive": lambda: Pause(until=datetime(2030, 1, 1))}[result]()


def make_run(payload: Any, failure_count: int = 0, carry: Any = None) -> Run:
    claimed = ClaimedJob(id="01J0000000000000000000000A", kind="job", payload=payload, carry=carry, priority=1,
                         created_at=datetime.now(timezone.utc), run_count=failure_count + 1,
                         failure_count=failure_count, claimed_by="host:1")
    ctx = JobContext(claimed, carry, lambda: pytest.fail("no session in unit tests"),
                     logging.LoggerAdapter(logging.getLogger("test"), {}))
    return Run(job=claimed, ctx=ctx)


def outcome_of(result: str, failure_count: int = 0, carry: Any = None) -> Any:
    run = make_run({"result": result}, failure_count, carry)
    process(run, Registry([Job]))
    assert run.params is not None
    return run.params


@pytest.mark.parametrize(("result", "outcome", "failure"), [
    ("none", Outcome.COMPLETED, False), ("complete", Outcome.COMPLETED, False), ("die", Outcome.DEAD, False),
    ("retry", Outcome.RETRIED, True), ("raise", Outcome.RETRIED, True), ("pause", Outcome.PAUSED, False),
    ("junk", Outcome.COMPLETED, False), ("set", Outcome.COMPLETED, False), ("naive", Outcome.RETRIED, True),
])
def test_each_result_maps_to_its_outcome(result: str, outcome: Outcome, failure: bool) -> None:
    params = outcome_of(result)
    assert (params.outcome, params.failure) == (outcome, failure)
    assert params.fence.run_count == 1 and params.fence.claimed_by == "host:1"


def test_notes_and_delays() -> None:
    assert outcome_of("raise").note == "RuntimeError: kaput"
    assert outcome_of("raise").delay == timedelta(seconds=10)
    assert outcome_of("raise", failure_count=1).delay == timedelta(seconds=20)
    assert outcome_of("junk").attachment == "junk" and outcome_of("junk").note is None
    assert "set is not JSON" in outcome_of("set").note
    assert "timezone-aware" in outcome_of("naive").note
    assert outcome_of("pause").delay == timedelta(seconds=5)


def test_failure_at_max_failures_is_dead() -> None:
    params = outcome_of("raise", failure_count=2)
    assert (params.outcome, params.failure) == (Outcome.DEAD, True)
    assert "max_failures 3" in params.note


def test_carry_is_dumped_through_the_carry_schema() -> None:
    assert outcome_of("pause", carry={"step": 4}).carry == {"step": 5}
    assert outcome_of("pause").save_carry


def test_undecodable_payload_is_dead_without_running() -> None:
    run = make_run({"unexpected": 1})
    process(run, Registry([Job]))
    assert run.params is not None and run.params.outcome == Outcome.DEAD
    assert "stored payload" in run.params.note and "unexpected" in run.params.note


def test_unknown_kind_is_dead() -> None:
    run = make_run({})
    process(run, Registry([]))
    assert run.params is not None and run.params.outcome == Outcome.DEAD and "job" in run.params.note


def test_base_exceptions_are_failures() -> None:
    run = make_run({"result": "none"})
    run.task_type = Job
    params = classify(run, KeyboardInterrupt())
    assert params.outcome == Outcome.RETRIED and "KeyboardInterrupt" in params.note
