"""Conformance of the whole worker, per sync driver: the core behaviours with a real Worker.

``engine`` is this suite's per-driver engine (see ``conftest.py``), so every
enqueue, claim, outcome write, lease renewal and recovery, and the LISTEN
wake-up, goes through psycopg2 and then through psycopg 3.  Waits are on the
worker's events, never on sleeps.
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from factories import factories_for
from marshmallow import Schema, fields
from queue_kit import Events, drain, enqueue, job_row, journal, running, side_rows, side_table, side_write, wait_until
from sqlalchemy.orm import Session

from venturi_sa import Complete, Die, JobContext, Pause, Queue, Retry, Task, Worker
from venturi_sa.storage import claim as claims
from venturi_sa.storage import leases
from venturi_sa.storage.params import ClaimParams, RecoverParams


class Script(Schema):
    action = fields.String(required=True)
    n = fields.Integer(load_default=0)


class Step(Schema):
    step = fields.Integer(required=True)


def scripted(side: str, ran: list[tuple[str, int]] | None = None) -> type[Task]:
    """A task whose payload says what its handler returns; each run writes a side row in ctx.session."""

    def run(self: Task, ctx: JobContext) -> Any:
        action = self.payload["action"]
        if ran is not None:
            ran.append((action, self.payload["n"]))
        side_write(ctx.session, side, ctx.job_id, ctx.run_count, action)
        if action == "complete":
            return Complete(f"done {self.payload['n']}")
        if action == "pause":
            ctx.carry = {"step": (ctx.carry or {"step": 0})["step"] + 1}
            return Pause(delay=timedelta(hours=1), note="later")
        if action == "retry":
            return Retry("again", delay=timedelta(hours=1))
        if action == "die":
            return Die("hopeless")
        raise ValueError("the disk is full")

    return type("Scripted", (Task,), {"KIND": "scripted", "Payload": Script, "Carry": Step, "run": run,
                                      "max_failures": 3})


def test_commit_publishes_and_rollback_discards(engine: sa.Engine, models: Any, prefix: str) -> None:
    T = scripted(side_table(engine, prefix))
    queue = Queue(models, [T])
    with Session(engine) as session:
        gone = queue.enqueue(session, T(action="complete")).id
        session.rollback()
    [kept] = enqueue(engine, queue, T(action="complete"))
    with engine.connect() as conn:
        ids = conn.execute(sa.select(models.Job.id)).scalars().all()
    assert ids == [kept] and gone != kept


def test_claim_order_is_priority_then_age(engine: sa.Engine, models: Any, prefix: str) -> None:
    ran: list[tuple[str, int]] = []
    T = scripted(side_table(engine, prefix), ran)
    queue = Queue(models, [T])
    enqueue(engine, queue, T(action="complete", n=1), priority=2)
    enqueue(engine, queue, T(action="complete", n=2))
    enqueue(engine, queue, T(action="complete", n=3), priority=0)
    enqueue(engine, queue, T(action="complete", n=4))
    assert drain(queue, engine, concurrency=1, batch_size=1) == 4
    assert [n for _, n in ran] == [3, 2, 4, 1]


def test_every_outcome(engine: sa.Engine, models: Any, prefix: str) -> None:
    side = side_table(engine, prefix)
    T = scripted(side)
    queue = Queue(models, [T])
    ids = dict(zip(["complete", "pause", "retry", "die", "raise"],
                   enqueue(engine, queue, *(T(action=a) for a in ["complete", "pause", "retry", "die", "raise"])),
                   strict=True))
    assert drain(queue, engine) == 5
    rows = {action: job_row(engine, models, job_id) for action, job_id in ids.items()}
    got = {a: (r.status, r.failure_count, r.finished_at is not None) for a, r in rows.items()}
    assert got == {"complete": ("completed", 0, True), "pause": ("pending", 0, False),
                   "retry": ("pending", 1, False), "die": ("dead", 0, True), "raise": ("pending", 1, False)}
    assert rows["pause"].carry == {"step": 1}
    assert rows["pause"].visible_at - rows["pause"].created_at > timedelta(minutes=59)
    entries = {a: [(e.outcome, e.run_no) for e in journal(engine, models, i)] for a, i in ids.items()}
    assert entries == {"complete": [("completed", 1)], "pause": [("paused", 1)], "retry": [("retried", 1)],
                       "die": [("dead", 1)], "raise": [("retried", 1)]}
    assert "the disk is full" in journal(engine, models, ids["raise"])[0].note
    # ctx.session work commits with the outcome, exactly once; the exception's work is rolled back
    assert sorted(r.note for r in side_rows(engine, side)) == ["complete", "die", "pause", "retry"]


def test_the_backstop_makes_a_job_dead(engine: sa.Engine, models: Any, prefix: str) -> None:
    T = scripted(side_table(engine, prefix))
    queue = Queue(models, [T])
    with Session(engine) as session, session.begin():
        JobFactory, _ = factories_for(models, session)
        job_id = JobFactory(kind="scripted", payload={"action": "raise"}, failure_count=2, run_count=2).id
    drain(queue, engine)
    row = job_row(engine, models, job_id)
    assert (row.status, row.failure_count, row.run_count) == ("dead", 3, 3)
    assert [e.outcome for e in journal(engine, models, job_id)] == ["dead"]


def test_a_zombie_outcome_is_discarded_with_its_session_work(engine: sa.Engine, models: Any, prefix: str,
                                                             caplog: pytest.LogCaptureFixture) -> None:
    side = side_table(engine, prefix)

    class Zombie(Task):
        KIND = "zombie"

        def run(self, ctx: JobContext) -> Complete:
            side_write(ctx.session, side, ctx.job_id, ctx.run_count, "late")
            ctx.session.flush()
            with Session(engine) as session, session.begin():  # the lease is stolen meanwhile
                session.execute(sa.update(models.Job).where(models.Job.id == ctx.job_id)
                                .values(claim_expires_at=sa.func.now() - timedelta(seconds=1))
                                .execution_options(synchronize_session=False))
                leases.recover(models, session, RecoverParams(max_failures={"zombie": 10}))
            with Session(engine) as session, session.begin():
                claims.claim(models, session, ClaimParams(worker_id="thief:1", kinds=["zombie"], limit=1,
                                                          leases={}, default_lease=timedelta(minutes=5)))
            return Complete("too late")

    queue = Queue(models, [Zombie])
    [job_id] = enqueue(engine, queue, Zombie())
    with caplog.at_level(logging.WARNING, logger="venturi_sa"):
        drain(queue, engine, concurrency=1)
    row = job_row(engine, models, job_id)
    assert (row.status, row.claimed_by, row.run_count) == ("claimed", "thief:1", 2)
    assert [e.outcome for e in journal(engine, models, job_id)] == ["stale-recovered"]
    assert side_rows(engine, side) == []
    assert any("lease lost" in r.getMessage() for r in caplog.records)


def test_an_expired_lease_is_recovered_and_run_again(engine: sa.Engine, models: Any) -> None:
    runs: list[int] = []

    class Again(Task):
        KIND = "again"

        def run(self, ctx: JobContext) -> None:
            runs.append(ctx.run_count)

    queue = Queue(models, [Again])
    with Session(engine) as session, session.begin():
        JobFactory, _ = factories_for(models, session)
        job_id = JobFactory(expired=True, kind="again").id
    events = Events()
    with running(Worker(queue, engine, poll_interval=0.2, recover_interval=0.1, on_event=events)):
        events.wait_for("finished", job_id=job_id)
    assert [e.outcome for e in journal(engine, models, job_id)] == ["stale-recovered", "completed"]
    assert runs == [2]


def test_a_held_lease_is_renewed(engine: sa.Engine, models: Any) -> None:
    started, release = threading.Event(), threading.Event()

    class Long(Task):
        KIND = "long"
        lease = timedelta(seconds=1)

        def run(self, ctx: JobContext) -> None:
            started.set()
            release.wait(20)

    queue = Queue(models, [Long])
    [job_id] = enqueue(engine, queue, Long())
    events = Events()
    with running(Worker(queue, engine, poll_interval=0.2, on_event=events)):
        assert started.wait(20)
        first = job_row(engine, models, job_id).claim_expires_at
        wait_until(lambda: job_row(engine, models, job_id).claim_expires_at > first, what="a renewal")
        release.set()
        events.wait_for("finished", job_id=job_id)
    assert [e.outcome for e in journal(engine, models, job_id)] == ["completed"]


def test_an_idle_worker_is_woken_by_notify(engine: sa.Engine, models: Any,
                                           caplog: pytest.LogCaptureFixture) -> None:
    class Ping(Task):
        KIND = "ping"

    queue = Queue(models, [Ping])
    events = Events()
    worker = Worker(queue, engine, poll_interval=30, on_event=events)
    with caplog.at_level(logging.DEBUG, logger="venturi_sa"), running(worker):
        events.wait_for("idle")
        assert worker.listener is not None and worker.listener.connected.wait(20)
        for _ in range(3):
            mark = events.mark()
            start = time.monotonic()
            [job_id] = enqueue(engine, queue, Ping())
            at, _ = events.wait_for("finished", after=mark, timeout=5, job_id=job_id)
            assert at - start < 2.0
            events.wait_for("idle", after=mark)
    assert not [r for r in caplog.records if "LISTEN" in r.getMessage()]
