"""Defect 6: any exception from user code (payload hooks, backoff) ends in a recorded outcome.

And whatever the run opened (its ``ctx.session``) is closed: no backend of
the worker is left ``idle in transaction`` holding the run's row locks.
"""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import sqlalchemy as sa
from marshmallow import Schema, fields, post_load
from support.probes import app_sessions, running, settled, side_table, side_write, worker_engine
from support.waiting import Events
from support.workers import enqueue, journal

from venturi_sa import JobContext, Queue, Task, Worker

LOOKUP: dict[str, int] = {}  # what the payload hook resolves names against


class Resolved(Schema):
    name = fields.String(required=True)

    @post_load
    def resolve(self, data: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        return {**data, "id": LOOKUP[data["name"]]}  # KeyError once the name is gone


# Regression test of defect 6 (worker hardening issue): failed on e53c386.
def test_payload_hook_raising_keyerror_is_recorded_dead(engine: sa.Engine, models: Any) -> None:
    class Lookup(Task):
        KIND = "lookup"
        Payload = Resolved

        def run(self, ctx: JobContext) -> None:
            raise AssertionError("the payload cannot be decoded; the handler must not run")

    queue = Queue(models, [Lookup])
    LOOKUP["zz_gone"] = 1
    [job_id] = enqueue(engine, queue, Lookup(name="zz_gone"))  # valid at enqueue
    del LOOKUP["zz_gone"]  # ... but no longer when the worker decodes it
    events = Events()
    with running(Worker(queue, engine, poll_interval=0.1, listen=False, on_event=events)):
        events.wait_for("finished", job_id=job_id)
        row = settled(engine, models, job_id, timeout=3, statuses=("pending", "dead"))
    entries = journal(engine, models, job_id)
    assert (row.status, [e.outcome for e in entries]) == ("dead", ["dead"])
    assert "zz_gone" in (entries[0].note or ""), entries[0].note


def failing_backoff_task(side: str) -> type[Task]:
    class Flaky(Task):
        KIND = "flaky"

        @classmethod
        def backoff(cls, failure_count: int) -> timedelta:
            raise RuntimeError("backoff table missing")

        def run(self, ctx: JobContext) -> None:
            side_write(ctx.session, side, ctx.job_id, ctx.run_count, "locked")
            ctx.session.execute(sa.text(f"SELECT 1 FROM {side} FOR UPDATE"))  # row locks in the run's tx
            raise ValueError("the remote said no")

    return Flaky


# Regression test of defect 6 (worker hardening issue): failed on e53c386.
def test_failing_backoff_is_recorded_with_a_note(pg_url: str, engine: sa.Engine, models: Any, prefix: str) -> None:
    side = side_table(engine, prefix)
    Flaky = failing_backoff_task(side)
    queue = Queue(models, [Flaky])
    [job_id] = enqueue(engine, queue, Flaky())
    events = Events()
    wengine = worker_engine(pg_url, f"hard-{uuid.uuid4().hex[:12]}")
    try:
        with running(Worker(queue, wengine, poll_interval=0.1, listen=False, on_event=events)):
            events.wait_for("finished", job_id=job_id)
            row = settled(engine, models, job_id, timeout=3, statuses=("pending", "dead"))
    finally:
        wengine.dispose()
    [entry] = [e for e in journal(engine, models, job_id) if e.run_no == 1]
    assert (row.status, entry.outcome) in {("pending", "retried"), ("dead", "dead")}
    assert "the remote said no" in (entry.note or "") or "backoff" in (entry.note or ""), entry.note


# Regression test of defect 6 (worker hardening issue): failed on e53c386.
def test_failing_backoff_leaves_no_transaction_open(pg_url: str, engine: sa.Engine, models: Any,
                                                     prefix: str) -> None:
    side = side_table(engine, prefix)
    Flaky = failing_backoff_task(side)
    queue = Queue(models, [Flaky])
    [job_id] = enqueue(engine, queue, Flaky())
    events = Events()
    app = f"hard-{uuid.uuid4().hex[:12]}"
    wengine = worker_engine(pg_url, app)
    try:
        with running(Worker(queue, wengine, poll_interval=0.1, listen=False, on_event=events)):
            events.wait_for("finished", job_id=job_id)
        # the worker has stopped: nothing of its runs may still hold a transaction (and row locks)
        open_tx = app_sessions(engine, app, state="idle in transaction")
        assert not open_tx, f"worker backends left idle in transaction: {[r.query for r in open_tx]}"
        with engine.begin() as conn:  # the run's row lock is gone too
            conn.execute(sa.text("SET LOCAL lock_timeout = '500ms'"))
            conn.execute(sa.text(f"SELECT 1 FROM {side} FOR UPDATE"))
    finally:
        wengine.dispose()
