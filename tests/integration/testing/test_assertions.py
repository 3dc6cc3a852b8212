"""assert_enqueued / refute_enqueued / enqueued see the session's own uncommitted jobs."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
import sqlalchemy as sa
from marshmallow import Schema, fields
from sqlalchemy.orm import Session

from venturi_sa import Models, Priority, Queue, Task
from venturi_sa.testing import assert_enqueued, drain, enqueued, refute_enqueued


class Receipt(Task):
    KIND = "send_receipt"

    class Payload(Schema):
        order_id = fields.Integer(required=True)
        day = fields.Date(load_default=None)
        meta = fields.Dict(load_default=dict)


def test_uncommitted_jobs_are_seen_by_their_session_only(
        no_rows_left: None, venturi_queue_session: Session, models: Models, engine: sa.Engine) -> None:
    queue = Queue(models, [Receipt])
    queue.enqueue(venturi_queue_session, Receipt(order_id=7, meta={"a": {"b": 1, "c": 2}}))
    assert_enqueued(venturi_queue_session, queue, Receipt, payload={"order_id": 7})
    assert_enqueued(venturi_queue_session, queue, "send_receipt", payload={"meta": {"a": {"b": 1}}}, count=1)
    assert [j.kind for j in enqueued(venturi_queue_session, queue)] == ["send_receipt"]
    with Session(engine) as other:
        refute_enqueued(other, queue, Receipt)


def test_filters_priority_schedule_count_and_loaded_payloads(venturi_queue_session: Session, models: Models) -> None:
    queue = Queue(models, [Receipt])
    s = venturi_queue_session
    queue.enqueue(s, Receipt(order_id=1, day="2030-05-01"), priority=Priority.HIGH)
    queue.enqueue(s, Receipt(order_id=2), delay=timedelta(hours=2))
    assert_enqueued(s, queue, Receipt, payload={"day": datetime(2030, 5, 1).date()})  # as the schema loads it
    assert_enqueued(s, queue, Receipt, priority=Priority.HIGH, payload={"order_id": 1})
    refute_enqueued(s, queue, Receipt, priority=Priority.HIGH, payload={"order_id": 2})
    in_two_hours = (timedelta(hours=2), timedelta(seconds=5))
    assert_enqueued(s, queue, Receipt, payload={"order_id": 2}, scheduled_within=in_two_hours)
    refute_enqueued(s, queue, Receipt, payload={"order_id": 2}, scheduled_within=timedelta(0))
    assert_enqueued(s, queue, Receipt, count=2)
    assert_enqueued(s, queue, count=2)
    when = assert_enqueued(s, queue, payload={"order_id": 2})[0].visible_at
    assert_enqueued(s, queue, scheduled_within=(when.astimezone(timezone.utc), timedelta(0)))


def test_failure_messages_list_what_was_enqueued(venturi_queue_session: Session, models: Models) -> None:
    queue = Queue(models, [Receipt])
    s = venturi_queue_session
    with pytest.raises(AssertionError, match=r"found 0\.\nNo jobs are enqueued in queue"):
        assert_enqueued(s, queue, Receipt)
    queue.enqueue(s, Receipt(order_id=8))
    with pytest.raises(AssertionError) as failed:
        assert_enqueued(s, queue, Receipt, payload={"order_id": 7})
    message = str(failed.value)
    assert "Expected a job of kind 'send_receipt' with payload including {'order_id': 7}" in message
    assert "Enqueued in queue" in message and "(1 pending):\n  send_receipt  payload=" in message
    assert "'order_id': 8" in message and "priority=1  visible_at=" in message
    with pytest.raises(AssertionError, match="Expected 2 jobs .* found 1"):
        assert_enqueued(s, queue, Receipt, count=2)
    with pytest.raises(AssertionError, match=r"(?s)Expected no job of kind 'send_receipt'.*found 1.*'order_id': 8"):
        refute_enqueued(s, queue, Receipt)


def test_only_pending_jobs_count(venturi_queue_session: Session, venturi_queue: Queue, models: Models) -> None:
    s, q = venturi_queue_session, venturi_queue
    q.enqueue(s, q.registry.get("note")(body="done soon"))
    assert_enqueued(s, q, "note")
    drain(s, q)
    refute_enqueued(s, q, "note")
    assert enqueued(s, models) == []
