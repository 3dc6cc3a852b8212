"""A sync durable call (``ctx.wait_for``...) from an ``async def`` handler on a worker with an AsyncEngine.

The statement would wait for the worker's loop, which the handler holds: it is
refused naming the ``*_async`` twin (it was ``RuntimeError: WorkerLoop.run()
called on the loop's own thread``).  On a sync engine the call works, blocking
the loop for its round trip.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from support.async_engines import make_async_engine
from support.workers import enqueue, journal

from venturi_sa import JobContext, Models, Queue, Task, Worker


def test_a_sync_wait_for_on_an_async_engine_worker_names_wait_for_async(engine: sa.Engine, pg_url: str,
                                                                         models: Models) -> None:
    queue = Queue(models)

    @queue.register
    class Waits(Task):
        KIND = "waits"
        max_failures = 1

        async def run(self, ctx: JobContext) -> Any:
            return ctx.wait_for("approved", timeout=60)

    async_engine = make_async_engine(pg_url, "psycopg_async")
    [refused] = enqueue(engine, queue, Waits())
    Worker(queue, async_engine, poll_interval=0.2).run_until_idle()
    assert queue.get_job(engine, refused).status == "dead"
    note = journal(engine, models, refused)[-1].note
    assert note.startswith("InvalidOption: ctx.wait_for() from an async def handler would block the event loop")
    assert "use `await ctx.wait_for_async(...)`" in note
    [waiting] = enqueue(engine, queue, Waits())
    Worker(queue, engine, poll_interval=0.2).run_until_idle()  # a sync engine: the call works
    assert queue.explain(engine, waiting).codes[0] == "waiting_for_signal"
