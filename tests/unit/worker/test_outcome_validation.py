"""Outcomes check their fields when they are built, and a bad one ends the run as a retryable failure."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from venturi_sa import Complete, Die, Outcome, Pause, Retry, Task
from venturi_sa.errors import InvalidOption
from venturi_sa.storage.params import ClaimedJob
from venturi_sa.task import Registry
from venturi_sa.worker.context import JobContext  # the worker's class: these tests build one
from venturi_sa.worker.pipeline import decide as process
from venturi_sa.worker.run import Run

AWARE = datetime(2030, 1, 1, tzinfo=timezone.utc)


@pytest.mark.parametrize(("build", "message"), [
    (lambda: Retry(delay=5), "Retry.delay must be a datetime.timedelta, got int 5"),
    (lambda: Retry(delay=timedelta(seconds=-1)), "Retry.delay must not be negative"),
    (lambda: Retry(note=3), "Retry.note must be a str or None, got int 3"),
    (lambda: Pause(until="2030-01-01"), "Pause.until must be a datetime.datetime, got str '2030-01-01'"),
    (lambda: Pause(until=datetime(2030, 1, 1)), "Pause.until must be timezone-aware"),
    (lambda: Pause(delay=1.5), "Pause.delay must be a datetime.timedelta, got float 1.5"),
    (lambda: Pause(delay=timedelta(minutes=-5)), "Pause.delay must not be negative"),
    (lambda: Pause(note=b"x"), "Pause.note must be a str or None, got bytes"),
    (lambda: Complete(note=42), "Complete.note must be a str or None, got int 42"),
    (lambda: Die(None), "Die.note must be a str, got NoneType None"),  # type: ignore[arg-type]
    (lambda: Die(note={"why": 1}), "Die.note must be a str, got dict"),  # type: ignore[arg-type]
])
def test_a_bad_field_raises_naming_it(build: Any, message: str) -> None:
    with pytest.raises(InvalidOption) as raised:
        build()
    assert str(raised.value).startswith(message)


def test_good_outcomes_build() -> None:
    assert Retry("again", delay=timedelta(0)).delay == timedelta(0)
    assert Pause(until=AWARE, note="later").until == AWARE
    assert Pause(delay=timedelta(seconds=5)).delay == timedelta(seconds=5)
    assert Complete().note is None and Complete("done").note == "done"
    assert Die("no").note == "no"


class Builds(Task):
    KIND = "builds"
    max_failures = 3

    def run(self, ctx: JobContext) -> Any:
        return Retry("flaky", delay=5)  # type: ignore[arg-type] - the mistake under test


def test_a_handler_building_a_bad_outcome_is_a_retryable_failure_with_that_message() -> None:
    claimed = ClaimedJob(id="01J0000000000000000000000A", kind="builds", payload={}, carry=None, priority=1,
                         created_at=datetime.now(timezone.utc), run_count=1, failure_count=0,
                         claimed_by="host:1")
    ctx = JobContext(claimed, None, lambda: pytest.fail("no session in unit tests"),
                     logging.LoggerAdapter(logging.getLogger("test"), {}))
    run = Run(job=claimed, ctx=ctx)
    process(run, Registry([Builds]))
    assert run.params is not None and run.failed
    assert (run.params.outcome, run.params.failure) == (Outcome.RETRIED, True)
    assert run.params.note == "InvalidOption: Retry.delay must be a datetime.timedelta, got int 5"
