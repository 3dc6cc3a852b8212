"""An application-like queue for the tests of ``venturi_sa.testing``: tasks that write, fail, spawn, wait."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import sqlalchemy as sa
from marshmallow import Schema, fields

from venturi_sa import Complete, JobContext, Models, Pause, Queue, Retry, Task

NOTES = sa.Table("testing_notes", sa.MetaData(), sa.Column("id", sa.Integer, sa.Identity(), primary_key=True),
                 sa.Column("body", sa.Text, nullable=False), sa.Column("run_no", sa.Integer, nullable=False))


class BodySchema(Schema):
    body = fields.String(required=True)


def note(ctx: JobContext, body: str) -> None:
    ctx.session.execute(sa.insert(NOTES).values(body=body, run_no=ctx.run_count))


def notes(session: Any) -> list[str]:
    return list(session.scalars(sa.select(NOTES.c.body).order_by(NOTES.c.id)))


def make_queue(models: Models) -> Queue:
    """A fresh queue with fresh task types (so a handler can enqueue on its own queue)."""
    queue = Queue(models)

    @queue.register
    class Note(Task):
        KIND = "note"
        Payload = BodySchema

        def run(self, ctx: JobContext) -> None:
            note(ctx, self.payload["body"])

    @queue.register
    class Boom(Task):
        KIND = "boom"
        max_failures = 3

        def run(self, ctx: JobContext) -> None:
            note(ctx, "before the boom")
            raise ValueError("boom")

    @queue.register
    class Spawn(Task):
        """Writes a note and enqueues ``n`` more Spawns counting down, then a Note."""

        KIND = "spawn"

        class Payload(Schema):
            n = fields.Integer(required=True)

        def run(self, ctx: JobContext) -> None:
            n = self.payload["n"]
            note(ctx, f"spawn {n}")
            queue.enqueue(ctx.session, Spawn(n=n - 1) if n > 1 else Note(body="leaf"))

    @queue.register
    class Flaky(Task):
        """Fails its first run; backs off 10 minutes."""

        KIND = "flaky"

        @classmethod
        def backoff(cls, failure_count: int) -> timedelta:
            return timedelta(minutes=10)

        def run(self, ctx: JobContext) -> None:
            if ctx.run_count == 1:
                raise RuntimeError("first run fails")
            note(ctx, "flaky done")

    @queue.register
    class Nap(Task):
        """Pauses an hour on its first run, keeping a carry; completes on the second."""

        KIND = "nap"

        def run(self, ctx: JobContext) -> Pause | Complete:
            if ctx.carry is None:
                ctx.carry = {"slept": 1}
                return Pause(delay=timedelta(hours=1), note="napping")
            note(ctx, f"woke after {ctx.carry['slept']}")
            return Complete("rested")

    @queue.register
    class BadRetry(Task):
        KIND = "bad_retry"

        def run(self, ctx: JobContext) -> Retry:
            return Retry(delay=5)  # type: ignore[arg-type] - the mistake under test

    return queue
