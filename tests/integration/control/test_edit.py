"""Edits of pending jobs and "retry now": validated, journaled, refused for claimed and finished jobs."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from threading import Event
from typing import Any

import pytest
import sqlalchemy as sa
from marshmallow import Schema, fields
from support.control import watched
from support.queues import drain
from support.waiting import WAIT
from support.workers import enqueue, job_row, journal

from venturi_sa import JobContext, Queue, Retry, Task
from venturi_sa.errors import InvalidOption, InvalidPayload, InvalidTransition

pytestmark = pytest.mark.timeout(60)


class Order(Schema):
    order_id = fields.Integer(required=True)


def make_queue(models: Any, gate: Event | None = None) -> Queue:
    class Receipt(Task):
        KIND = "receipt"
        Payload = Order

        def run(self, ctx: JobContext) -> Retry | None:
            if gate is not None:
                assert gate.wait(WAIT)
            return Retry(delay=timedelta(hours=1), note="later") if self.payload["order_id"] < 0 else None

    return Queue(models, [Receipt])


def test_edit_priority_time_and_payload_each_journaled(engine: sa.Engine, models: Any) -> None:
    queue = make_queue(models)
    [job_id] = enqueue(engine, queue, queue.registry.get("receipt")(order_id=1), delay=timedelta(hours=1))
    later = datetime(2031, 1, 1, tzinfo=timezone.utc)
    job = queue.edit(engine, job_id, priority=0, run_at=later, note="VIP", actor="ops")
    assert (job.priority, job.visible_at) == (0, later)
    job = queue.edit(engine, job_id, payload={"order_id": 7}, actor="ops")
    assert job.payload == {"order_id": 7}
    job = queue.edit(engine, job_id, run_now=True, actor="ops")
    assert job.visible_at <= datetime.now(timezone.utc)
    assert [(e.outcome, e.note) for e in journal(engine, models, job_id)] == [
        ("released", f"edited by ops: priority -> 0; run at {later.isoformat()} (VIP)"),
        ("released", "edited by ops: payload replaced"),
        ("released", "edited by ops: run now"),
    ]
    assert drain(queue, engine) == 1


def test_bad_edits_write_nothing(engine: sa.Engine, models: Any) -> None:
    queue = make_queue(models)
    [job_id] = enqueue(engine, queue, queue.registry.get("receipt")(order_id=1))
    before = job_row(engine, models, job_id)
    with pytest.raises(InvalidPayload, match="order_id"):
        queue.edit(engine, job_id, payload={"order_id": "x"})
    with pytest.raises(InvalidOption, match="priority"):
        queue.edit(engine, job_id, priority=7)
    with pytest.raises(InvalidOption, match="one of"):
        queue.edit(engine, job_id, run_now=True, delay=timedelta(1))
    with pytest.raises(InvalidOption, match="nothing to edit"):
        queue.edit(engine, job_id)
    assert job_row(engine, models, job_id) == before and journal(engine, models, job_id) == []


def test_edits_of_running_and_finished_jobs_are_refused(engine: sa.Engine, models: Any, gate: Event) -> None:
    queue = make_queue(models, gate)
    with watched(queue, engine) as events:
        [job_id] = enqueue(engine, queue, queue.registry.get("receipt")(order_id=1))
        events.wait_for("claimed", job_id=job_id)
        with pytest.raises(InvalidTransition, match="it is claimed, and only pending jobs can be edited"):
            queue.edit(engine, job_id, priority=0)
        with pytest.raises(InvalidTransition, match="claimed"):
            queue.retry_now(engine, job_id)
        gate.set()
        events.wait_for("finished", job_id=job_id)
    with pytest.raises(InvalidTransition, match="it is completed"):
        queue.edit(engine, job_id, run_now=True)
    assert [e.outcome for e in journal(engine, models, job_id)] == ["completed"]


def test_retry_now_ends_a_backoff(engine: sa.Engine, models: Any) -> None:
    queue = make_queue(models)
    [job_id] = enqueue(engine, queue, queue.registry.get("receipt")(order_id=-1))
    drain(queue, engine)
    assert queue.explain(engine, job_id).codes[0] == "backoff"
    job = queue.retry_now(engine, job_id, "smtp fixed", actor="ops")
    assert job.visible_at <= datetime.now(timezone.utc) and job.failure_count == 1
    assert journal(engine, models, job_id)[-1].note == "edited by ops: run now (smtp fixed)"
    assert queue.explain(engine, job_id).codes == ["eligible"]
