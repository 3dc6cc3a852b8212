"""Poison input at run time and BaseExceptions: a clear journal note, never a crashed worker."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from marshmallow import Schema, fields
from sqlalchemy.orm import Session
from support.factories import factories_for
from support.queues import drain
from support.workers import enqueue, job_row, journal

from venturi_sa import JobContext, Queue, Task


class Order(Schema):
    order_id = fields.Integer(required=True)


def make_tasks(done: list[Any]) -> tuple[type[Task], type[Task], type[Task]]:
    class Receipt(Task):
        KIND = "receipt"
        Payload = Order

        def run(self, ctx: JobContext) -> None:
            done.append(self.payload["order_id"])

    class Junk(Task):
        KIND = "junk"

        def run(self, ctx: JobContext) -> Any:
            return {42}  # neither an outcome nor JSON

    class Raiser(Task):
        KIND = "raiser"
        max_failures = 2

        class Payload(Schema):
            exc = fields.String(required=True)

        @classmethod
        def backoff(cls, failure_count: int) -> timedelta:
            return timedelta(hours=1)

        def run(self, ctx: JobContext) -> None:
            raise {"KeyboardInterrupt": KeyboardInterrupt(), "SystemExit": SystemExit(3),
                   "GeneratorExit": GeneratorExit("closed")}[self.payload["exc"]]

    return Receipt, Junk, Raiser


def test_stored_payload_that_no_longer_loads_is_dead_with_a_clear_note(
        engine: sa.Engine, models: Any) -> None:
    done: list[Any] = []
    Receipt, Junk, Raiser = make_tasks(done)
    queue = Queue(models, [Receipt, Junk, Raiser])
    with Session(engine) as session, session.begin():
        JobFactory, _ = factories_for(models, session)
        # as if written by an older release whose schema named the field differently
        bad = JobFactory(kind="receipt", payload={"order": 7}).id
        not_object = JobFactory(kind="receipt", payload=[1, 2]).id
    good = enqueue(engine, queue, *[Receipt(order_id=n) for n in range(5)])
    drain(queue, engine, concurrency=2)
    assert sorted(done) == [0, 1, 2, 3, 4]  # the worker kept going
    assert all(job_row(engine, models, j).status == "completed" for j in good)
    for job_id, needle in ((bad, "order_id"), (not_object, "list")):
        row = job_row(engine, models, job_id)
        [entry] = journal(engine, models, job_id)
        assert (row.status, entry.outcome) == ("dead", "dead")
        assert "stored payload" in entry.note and needle in entry.note


def test_handler_returning_a_value_json_cannot_store_completes_with_a_clear_note(
        engine: sa.Engine, models: Any) -> None:
    done: list[Any] = []
    Receipt, Junk, Raiser = make_tasks(done)
    queue = Queue(models, [Receipt, Junk, Raiser])
    [junk] = enqueue(engine, queue, Junk())
    after = enqueue(engine, queue, Receipt(order_id=1), Receipt(order_id=2))
    drain(queue, engine, concurrency=1)
    [entry] = journal(engine, models, junk)
    assert (job_row(engine, models, junk).status, job_row(engine, models, junk).failure_count) == ("completed", 0)
    assert entry.outcome == "completed" and "set is not JSON" in entry.note and "not stored" in entry.note
    assert sorted(done) == [1, 2] and all(job_row(engine, models, j).status == "completed" for j in after)


def test_keyboard_interrupt_in_a_handler_releases_the_run_and_stops_the_worker(
        engine: sa.Engine, models: Any) -> None:
    Receipt, Junk, Raiser = make_tasks([])
    queue = Queue(models, [Receipt, Junk, Raiser])
    [raiser] = enqueue(engine, queue, Raiser(exc="KeyboardInterrupt"))
    drain(queue, engine, concurrency=1)  # returns: the worker stopped
    row = job_row(engine, models, raiser)
    [entry] = journal(engine, models, raiser)
    assert (row.status, row.failure_count, entry.outcome) == ("pending", 0, "released")
    assert "KeyboardInterrupt" in entry.note


@pytest.mark.parametrize("exc", ["SystemExit", "GeneratorExit"])
def test_base_exception_in_a_handler_is_a_failure_and_the_worker_continues(
        engine: sa.Engine, models: Any, exc: str) -> None:
    done: list[Any] = []
    Receipt, Junk, Raiser = make_tasks(done)
    queue = Queue(models, [Receipt, Junk, Raiser])
    [raiser] = enqueue(engine, queue, Raiser(exc=exc))
    after = enqueue(engine, queue, *[Receipt(order_id=n) for n in range(3)])
    drain(queue, engine, concurrency=1)
    row = job_row(engine, models, raiser)
    [entry] = journal(engine, models, raiser)
    assert (row.status, row.failure_count, entry.outcome) == ("pending", 1, "retried")
    assert exc in entry.note
    assert sorted(done) == [0, 1, 2] and all(job_row(engine, models, j).status == "completed" for j in after)
