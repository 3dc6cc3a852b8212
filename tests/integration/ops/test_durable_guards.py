"""A job with recorded steps or an open sleep or wait: never a merge target, its payload not editable, counted."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from marshmallow import Schema, fields
from support.hooks import drain
from support.workers import enqueue, job_row

from venturi_sa import JobContext, Queue, Task
from venturi_sa.errors import InvalidTransition


class Account(Schema):
    account = fields.Integer(required=True)


class Refresh(Task):
    KIND = "refresh_steps"
    Payload = Account

    def dedup_key(self) -> str:
        return f"account:{self.payload['account']}"

    def run(self, ctx: JobContext) -> Any:
        ctx.step("fetched", lambda: self.payload["account"])
        ctx.sleep(timedelta(hours=1))


class Waits(Task):
    KIND = "waits"

    def run(self, ctx: JobContext) -> Any:
        return ctx.wait_for("go", timeout=timedelta(hours=1))


class Plain(Task):
    KIND = "plain_later"

    def run(self, ctx: JobContext) -> Any:
        return None


def test_a_sleeping_job_is_not_a_dedup_target(engine: sa.Engine, models: Any) -> None:
    queue = Queue(models, [Refresh])
    [first] = enqueue(engine, queue, Refresh(account=1))
    [merged] = enqueue(engine, queue, Refresh(account=1))
    assert merged == first  # not started: an ordinary merge target
    drain(queue, engine)
    assert job_row(engine, models, first).status == "pending"  # asleep for an hour
    [second] = enqueue(engine, queue, Refresh(account=1))
    assert second != first


def test_edit_payload_is_refused_and_requeue_can_reset(engine: sa.Engine, models: Any) -> None:
    queue = Queue(models, [Refresh])
    [job_id] = enqueue(engine, queue, Refresh(account=7))
    drain(queue, engine)
    with pytest.raises(InvalidTransition, match="recorded steps"):
        queue.edit(engine, job_id, payload={"account": 8})
    assert job_row(engine, models, job_id).payload == {"account": 7}
    queue.edit(engine, job_id, priority=0)  # anything else is still allowed


def test_stats_count_sleeping_and_waiting_apart_from_scheduled(engine: sa.Engine, models: Any) -> None:
    queue = Queue(models, [Refresh, Waits, Plain])
    enqueue(engine, queue, Refresh(account=1), Refresh(account=2), Waits())
    drain(queue, engine)
    enqueue(engine, queue, Plain(), delay=timedelta(hours=1))
    stats = queue.stats(engine)
    assert (stats.sleeping, stats.waiting_for_signal, stats.scheduled) == (2, 1, 1)
    assert stats.by_kind["refresh_steps"]["scheduled"] == 0 and stats.by_kind["plain_later"]["scheduled"] == 1
