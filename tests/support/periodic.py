"""Helpers of the periodic tier: a queue with schedulable kinds, simulated downtime, fire and job reads."""

from __future__ import annotations

import time
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from marshmallow import Schema, fields

from venturi_sa import JobContext, Models, Queue, Task, make_models


class TickPayload(Schema):
    n = fields.Integer(load_default=0)


class Tick(Task):
    KIND = "tick"
    Payload = TickPayload

    def run(self, ctx: JobContext) -> None:
        return None


class Tock(Task):
    """A second kind, for queues of other kind sets sharing a prefix."""

    KIND = "tock"
    Payload = TickPayload

    def run(self, ctx: JobContext) -> None:
        return None


def tick_queue(prefix: str, *tasks: type[Task]) -> Queue:
    return Queue(make_models(prefix), [Tick, *tasks])


def db_now(engine: sa.Engine) -> datetime:
    with engine.connect() as conn:
        value: datetime = conn.execute(sa.select(sa.func.statement_timestamp())).scalar_one()
        return value


def backdate(engine: sa.Engine, models: Models, name: str, next_at: datetime) -> None:
    """Simulated downtime: the schedule's next fire time is put back to ``next_at``."""
    table = models.schedules_table
    with engine.begin() as conn:
        conn.execute(sa.update(table).where(table.c.name == name).values(next_at=next_at))


def schedule_row(engine: sa.Engine, models: Models, name: str) -> sa.Row[Any]:
    table = models.schedules_table
    with engine.connect() as conn:
        return conn.execute(sa.select(table).where(table.c.name == name)).one()


def fire_times(engine: sa.Engine, models: Models, name: str) -> list[datetime]:
    fires = models.fires_table
    with engine.connect() as conn:
        return list(conn.execute(sa.select(fires.c.fire_at).where(fires.c.schedule == name)
                                 .order_by(fires.c.fire_at)).scalars())


def jobs_of(engine: sa.Engine, models: Models, kind: str = "tick") -> list[sa.Row[Any]]:
    jobs = models.jobs_table
    with engine.connect() as conn:
        return list(conn.execute(sa.select(jobs.c.id, jobs.c.payload, jobs.c.status, jobs.c.priority)
                                 .where(jobs.c.kind == kind)))


def aligned(t: datetime, period: timedelta) -> datetime:
    """``t`` rounded down to a multiple of ``period`` since the epoch (an interval fire time)."""
    epoch = datetime(1970, 1, 1, tzinfo=t.tzinfo)
    return epoch + period * ((t - epoch) // period)


def steady_fire_time(engine: sa.Engine, period: timedelta, margin: timedelta = timedelta(seconds=5)) -> datetime:
    """The current fire time of ``period`` on the database clock, at least ``margin`` before the next one.

    A test that fires "everything due" and then asserts nothing more is due
    fails if the next fire time arrives in between; this waits out the last
    ``margin`` of a period (a clock alignment, not a wait on another process).
    """
    now = db_now(engine)
    left = aligned(now, period) + period - now
    if left < margin:
        time.sleep(left.total_seconds() + 0.05)
        now = db_now(engine)
    return aligned(now, period)
