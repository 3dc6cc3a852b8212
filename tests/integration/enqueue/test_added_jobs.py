"""``queue.job(...)`` and ``session.add(Job(...))``: validated, and they wake workers on commit."""

from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
import sqlalchemy as sa
from marshmallow import Schema, fields
from sqlalchemy.orm import Session
from support.queues import count
from support.waiting import Events
from support.workers import job_row, running

from venturi_sa import JobContext, Queue, Task, Worker
from venturi_sa.errors import InvalidOption, InvalidPayload, UnknownKind
from venturi_sa.storage.params import Runner

WAKE = 2.0  # seconds an idle LISTENing worker may take to pick up a committed job


class Order(Schema):
    order_id = fields.Integer(required=True)


class Ship(Task):
    KIND = "ship"
    Payload = Order

    def run(self, ctx: JobContext) -> None:
        return None


class Once(Task):
    KIND = "once"

    def dedup_key(self) -> str:
        return "only"


def notifies(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, list[str]]]:
    """Record what the flush listener sends (channel, kinds), still sending it."""
    from venturi_sa import session_adds

    sent: list[tuple[str, list[str]]] = []
    real = session_adds.notify_kinds

    def record(runner: Runner, channel: str, kinds: list[str]) -> None:
        sent.append((channel, list(kinds)))
        real(runner, channel, kinds)

    monkeypatch.setattr(session_adds, "notify_kinds", record)
    return sent


def test_queue_job_is_validated_and_unsaved(engine: sa.Engine, models: Any) -> None:
    queue = Queue(models, [Ship, Once])
    job = queue.job(Ship(order_id=7), priority=0, delay=timedelta(hours=1))
    assert (job.kind, job.payload, job.priority, job.status) == ("ship", {"order_id": 7}, 0, "pending")
    assert sa.inspect(job).transient
    with pytest.raises(InvalidOption, match="priority"):
        queue.job(Ship(order_id=7), priority=9)
    with pytest.raises(InvalidOption, match="either delay or run_at"):
        queue.job(Ship(order_id=7), delay=timedelta(1), run_at=datetime.now(timezone.utc))
    with pytest.raises(InvalidOption, match="timezone-aware"):
        queue.job(Ship(order_id=7), run_at=datetime(2030, 1, 1))
    with pytest.raises(InvalidOption, match=r"dedup key .*use queue.enqueue\(session, task\)"):
        queue.job(Once())
    with pytest.raises(UnknownKind, match="not registered"):
        Queue(models, [Once]).job(Ship(order_id=1))


def test_queue_job_added_and_committed_is_a_pending_job_on_the_database_clock(engine: sa.Engine,
                                                                               models: Any) -> None:
    queue = Queue(models, [Ship])
    run_at = datetime(2031, 5, 1, 12, tzinfo=timezone.utc)
    with Session(engine) as session, session.begin():
        now, later, scheduled = (queue.job(Ship(order_id=1)), queue.job(Ship(order_id=2), delay=timedelta(hours=2)),
                                 queue.job(Ship(order_id=3), run_at=run_at))
        session.add_all([now, later, scheduled])
        session.flush()
        ids = now.id, later.id, scheduled.id
    rows = [job_row(engine, models, i) for i in ids]
    assert [r.status for r in rows] == ["pending"] * 3 and rows[0].carry is None
    assert rows[0].visible_at == rows[0].created_at
    assert rows[1].visible_at - rows[1].created_at == timedelta(hours=2)
    assert rows[2].visible_at == run_at


def test_an_added_job_wakes_an_idle_listening_worker(engine: sa.Engine, models: Any,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    queue = Queue(models, [Ship])
    sent = notifies(monkeypatch)
    events = Events()
    worker = Worker(queue, engine, poll_interval=30, on_event=events)
    with running(worker):
        events.wait_for("idle")
        assert worker.listener is not None and worker.listener.connected.wait(20)
        with Session(engine) as session, session.begin():
            session.add(models.Job(kind="ship", payload={"order_id": 5}))
            session.add(models.Job(kind="ship", payload={"order_id": 6}))
            session.flush()
            started = time.monotonic()
        events.wait_count("finished", 2, timeout=WAKE)
    assert time.monotonic() - started < WAKE
    assert sent == [(models.names.channel, ["ship"])]  # one NOTIFY per kind per flush, not per row


def test_enqueued_jobs_get_no_second_notify_and_rollback_sends_none(engine: sa.Engine, models: Any,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    queue = Queue(models, [Ship])
    sent = notifies(monkeypatch)
    with Session(engine) as session, session.begin():
        queue.enqueue(session, Ship(order_id=1))
    assert sent == []
    with Session(engine) as session:
        session.add(queue.job(Ship(order_id=2)))
        session.flush()
        session.rollback()
    assert len(sent) == 1 and count(engine, models.jobs_table) == 1


def test_a_checking_queue_refuses_an_unknown_kind_at_flush_with_nothing_written(engine: sa.Engine,
                                                                                models: Any) -> None:
    queue = Queue(models, [Ship], check_added_jobs=True)
    assert queue.check_added_jobs
    with Session(engine) as session:
        session.add(models.Job(kind="shipp", payload={"order_id": 5}))
        with pytest.raises(UnknownKind, match=r"kind 'shipp'.*registered kinds: ship"):
            session.flush()
        session.rollback()
        session.add(models.Job(kind="ship", payload={"order": 5}))
        with pytest.raises(InvalidPayload, match="order"):
            session.flush()
        session.rollback()
    assert count(engine, models.jobs_table) == 0


def test_without_a_checking_queue_any_kind_is_accepted(engine: sa.Engine, models: Any) -> None:
    Queue(models, [Ship])
    with Session(engine) as session, session.begin():
        session.add(models.Job(kind="elsewhere", payload={}))
    assert count(engine, models.jobs_table) == 1
