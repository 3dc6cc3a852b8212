"""Retention keeps an archived parent while a job that names it in ``after=`` has not ended."""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone
from typing import Any

import pytest
import sqlalchemy as sa
from marshmallow import Schema, fields
from support.archives import attach_days, noon, partition_names, relation_exists
from support.queues import drain
from support.workers import enqueue

from venturi_sa import JobContext, Queue, Task

DAY = timedelta(days=1)
BACKLOG = 3000


class Number(Schema):
    n = fields.Integer(required=True)


class Piece(Task):
    KIND = "piece"
    Payload = Number

    def run(self, ctx: JobContext) -> Any:
        return self.payload["n"]


class Summing(Task):
    KIND = "summing"

    def run(self, ctx: JobContext) -> Any:
        return sum(p.result for p in ctx.parents)


@pytest.fixture
def queue(models: Any) -> Queue:
    return Queue(models, [Piece, Summing], archive_after=None)


def archived_ids(engine: sa.Engine, models: Any) -> set[str]:
    with engine.connect() as conn:
        return set(conn.execute(sa.select(models.archive_table.c.id)).scalars())


def backlog(engine: sa.Engine, models: Any, first: date, days: int) -> None:
    """``BACKLOG`` archived jobs spread over ``days`` days from ``first``, in one transaction."""
    rows = []
    for n in range(BACKLOG):
        finished = noon(first + (n % days) * DAY) - timedelta(seconds=n)
        job = {"payload": {}, "priority": 1, "visible_at": finished.isoformat(), "run_count": 1,
               "failure_count": 0, "carry": None}
        rows.append({"id": f"old{n}", "kind": "noop", "status": "completed", "created_at": finished,
                     "finished_at": finished, "moved_at": finished + timedelta(minutes=1), "job": job,
                     "journal": []})
    with engine.begin() as conn:
        conn.execute(sa.insert(models.archive_table), rows)


def archived_parents_of_a_waiting_job(engine: sa.Engine, models: Any, queue: Queue,
                                      day: date) -> tuple[list[str], str]:
    """Three completed parents archived on ``day``, and a dependent enqueued after they moved, not yet run."""
    parts = enqueue(engine, queue, Piece(n=10), Piece(n=20), Piece(n=30))
    drain(queue, engine)
    assert queue.archive(engine) == 3
    a = models.archive_table
    with engine.begin() as conn:  # as if they had moved that day
        conn.execute(sa.update(a).where(a.c.id.in_(parts)).values(moved_at=noon(day), finished_at=noon(day) - DAY))
    [total] = enqueue(engine, queue, Summing(), after=parts, delay=timedelta(hours=1))
    return parts, total


def test_dropping_old_days_keeps_the_archived_parents_of_a_waiting_job(
        engine: sa.Engine, models: Any, queue: Queue) -> None:
    first = datetime.now(timezone.utc).date() - 5 * DAY
    days = attach_days(engine, models, first, 7)
    backlog(engine, models, first, 3)
    parts, total = archived_parents_of_a_waiting_job(engine, models, queue, first)
    cutoff = noon(first + 3 * DAY)  # days 0 to 2 are wholly before it

    assert queue.cleanup(engine, before=cutoff, dry_run=True) == BACKLOG
    assert queue.cleanup(engine, before=cutoff) == BACKLOG
    assert not any(relation_exists(engine, d) for d in days[:3]) and set(days[3:]) <= partition_names(engine, models)
    assert archived_ids(engine, models) == set(parts)  # moved into today's partition, the day dropped
    assert [queue.result(engine, p) for p in parts] == [10, 20, 30]

    queue.retry_now(engine, total)
    drain(queue, engine)
    assert queue.result(engine, total) == 60
    assert queue.cleanup(engine, before=cutoff) == 3  # nothing waits for them any more
    assert archived_ids(engine, models) == set()


def test_row_deletes_keep_the_archived_parents_of_a_waiting_job(
        engine: sa.Engine, models: Any, queue: Queue) -> None:
    first = datetime.now(timezone.utc).date() - 3 * DAY
    attach_days(engine, models, first, 2)
    backlog(engine, models, first, 2)
    parts, total = archived_parents_of_a_waiting_job(engine, models, queue, first + DAY)
    cutoff = noon(first + DAY) + timedelta(hours=1)  # falls in the second day: its rows are deleted one by one

    assert queue.cleanup(engine, before=cutoff, status="completed", dry_run=True) == BACKLOG
    assert queue.cleanup(engine, before=cutoff, status="completed", batch_size=500) == BACKLOG
    assert queue.cleanup(engine, before=cutoff) == 0
    assert archived_ids(engine, models) == set(parts)
    queue.retry_now(engine, total)
    drain(queue, engine)
    assert queue.result(engine, total) == 60
