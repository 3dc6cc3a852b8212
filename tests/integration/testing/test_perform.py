"""perform: one handler through the worker's round trip and outcome checks."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import date, datetime, timedelta
from typing import Any, ClassVar

import pytest
from marshmallow import Schema, fields
from sqlalchemy.orm import Session
from support.notes import notes

from venturi_sa import Complete, Die, JobContext, Models, Pause, Queue, Retry, Task
from venturi_sa.errors import InvalidOption, InvalidPayload, UnknownKind
from venturi_sa.states import Outcome
from venturi_sa.testing import RejectedOutcome, perform


class Invoice(Task):
    KIND = "invoice"
    max_failures = 2

    class Payload(Schema):
        due = fields.Date(required=True)

    class Carry(Schema):
        sent = fields.Date(load_default=None)

    seen: ClassVar[list[object]] = []
    behaviour: ClassVar[Callable[[JobContext], Any] | None] = None  # the handler under test, per test

    def run(self, ctx: JobContext) -> Any:
        Invoice.seen.append((self.payload["due"], ctx.carry, ctx.run_count, ctx.failure_count))
        return Invoice.behaviour(ctx) if Invoice.behaviour else Complete("sent")


@pytest.fixture(autouse=True)
def _reset() -> Iterator[None]:
    yield
    Invoice.behaviour = None
    Invoice.seen.clear()


def _with(behaviour: Callable[[JobContext], Any]) -> Invoice:
    Invoice.behaviour = behaviour
    return Invoice(due=date(2030, 1, 31))


def test_the_payload_and_carry_take_the_stored_round_trip() -> None:
    done = perform(Invoice(due=date(2030, 1, 31)), carry={"sent": date(2030, 1, 1)}, run_count=3, failure_count=2)
    assert Invoice.seen == [(date(2030, 1, 31), {"sent": date(2030, 1, 1)}, 3, 2)]  # loaded, as a handler sees it
    assert (done.outcome, done.note, done.failure, done.carry) == (Outcome.COMPLETED, "sent", False,
                                                                 {"sent": "2030-01-01"})  # stored form


def test_outcomes_are_classified_as_the_worker_would() -> None:
    paused = perform(_with(lambda ctx: Pause(delay=timedelta(minutes=5), note="later")))
    assert (paused.outcome, paused.delay, paused.failure) == (Outcome.PAUSED, timedelta(minutes=5), False)
    retried = perform(_with(lambda ctx: Retry("flaky", delay=timedelta(seconds=30))))
    assert (retried.outcome, retried.note, retried.delay, retried.failure) == (
        Outcome.RETRIED, "flaky", timedelta(seconds=30), True)
    backstop = perform(_with(lambda ctx: Retry("flaky")), failure_count=1)
    assert (backstop.outcome, backstop.note) == (Outcome.DEAD, "flaky (failure 2 of max_failures 2)")
    assert perform(_with(lambda ctx: Die("no such customer"))).outcome is Outcome.DEAD


@pytest.mark.parametrize("bad", [
    lambda ctx: Retry(delay=5),
    lambda ctx: Pause(until=datetime(2030, 1, 1)),
    lambda ctx: Complete(note=42),
])
def test_a_bad_outcome_raises_where_it_is_built(bad: Callable[[JobContext], Any]) -> None:
    with pytest.raises(InvalidOption, match="must be"):
        perform(_with(bad))
    lenient = perform(_with(bad), strict=False)
    assert lenient.outcome is Outcome.RETRIED and lenient.note and lenient.note.startswith("InvalidOption: ")


def test_a_returned_value_that_is_not_json_fails_the_unit_test_not_production() -> None:
    with pytest.raises(RejectedOutcome, match="a worker would record") as rejected:
        perform(_with(lambda ctx: {"done"}))
    assert rejected.value.performed.outcome is Outcome.COMPLETED  # completed without the result it returned
    lenient = perform(_with(lambda ctx: {"done"}), strict=False)
    assert lenient == rejected.value.performed


def test_bad_retry_is_recorded_as_the_worker_records_it_when_not_strict() -> None:
    performed = perform(_with(lambda ctx: Retry(delay=5)), strict=False)
    assert performed.outcome is Outcome.RETRIED
    assert performed.note == "InvalidOption: Retry.delay must be a datetime.timedelta, got int 5"


def test_a_handler_exception_is_reraised_or_returned() -> None:
    def fail(ctx: JobContext) -> None:
        raise KeyError("customer")

    with pytest.raises(KeyError, match="customer"):
        perform(_with(fail))
    performed = perform(_with(fail), strict=False)
    assert (performed.outcome, performed.note) == (Outcome.RETRIED, "KeyError: 'customer'")
    assert isinstance(performed.error, KeyError)


def test_invalid_payloads_fail_as_at_enqueue() -> None:
    with pytest.raises(InvalidPayload, match="due"):
        perform(Invoice(due="not a date"))


def test_ctx_session_is_the_given_session(venturi_queue_session: Session, venturi_queue: Queue) -> None:
    note_task = venturi_queue.registry.get("note")
    assert perform(note_task(body="unit"), session=venturi_queue_session).outcome is Outcome.COMPLETED
    assert notes(venturi_queue_session) == ["unit"]
    with pytest.raises(ValueError, match="boom"):
        perform(("boom", {}), queue=venturi_queue, session=venturi_queue_session)
    assert notes(venturi_queue_session) == ["unit"]  # the raising run's write was rolled back
    with pytest.raises(InvalidOption, match="pass perform"):
        perform(note_task(body="no session"))


def test_kinds_resolve_through_the_queue(models: Models) -> None:
    queue = Queue(models, [Invoice])
    assert perform(("invoice", {"due": "2030-02-01"}), queue=queue).outcome is Outcome.COMPLETED
    with pytest.raises(InvalidOption, match="needs queue"):
        perform(("invoice", {"due": "2030-02-01"}))
    with pytest.raises(UnknownKind):
        perform(Invoice(due=date(2030, 1, 1)), queue=Queue(models))
