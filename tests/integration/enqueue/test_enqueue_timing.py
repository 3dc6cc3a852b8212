"""Delays count from the enqueue call, on the database clock (defect #14).

``now()`` is the caller's transaction start; a delay given two seconds into a
transaction must not come out two seconds short.  Checked for one job, a bulk
``enqueue_many`` and the dedup path.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import sqlalchemy as sa
from marshmallow import Schema, fields
from sqlalchemy.orm import Session

from venturi_sa import JobContext, Queue, Task

WAIT = timedelta(seconds=1.5)
DELAY = timedelta(seconds=10)


class Report(Task):
    KIND = "report"

    def run(self, ctx: JobContext) -> None:
        pass


class Keyed(Task):
    KIND = "keyed"

    class Payload(Schema):
        key = fields.String(required=True)

    def dedup_key(self) -> str:
        return str(self.payload["key"])

    def run(self, ctx: JobContext) -> None:
        pass


def test_delay_counts_from_the_enqueue_call_not_the_transaction_start(engine: sa.Engine, models: Any) -> None:
    queue = Queue(models, [Report, Keyed])
    with Session(engine) as session, session.begin():
        started = session.execute(sa.select(sa.func.now())).scalar_one()
        session.execute(sa.text("SELECT pg_sleep(:s)"), {"s": WAIT.total_seconds()})  # the database waits
        delayed = [queue.enqueue(session, Report(), delay=DELAY)]
        delayed += queue.enqueue_many(session, [Report(), Report(), Report()], delay=DELAY)
        delayed += queue.enqueue_many(session, [Keyed(key="a"), Report()], delay=DELAY)
        immediate = queue.enqueue(session, Report())
        ended = session.execute(sa.select(sa.func.clock_timestamp())).scalar_one()
        times = [(job.created_at, job.visible_at) for job in delayed]
        now_job = (immediate.created_at, immediate.visible_at)
    for created, visible in times:
        assert started + WAIT <= created <= ended  # the enqueue call's time, not the transaction's
        assert visible - created == DELAY
        assert visible >= started + WAIT + DELAY
    assert now_job[0] == now_job[1] >= started + WAIT  # immediate: visible from its enqueue time
