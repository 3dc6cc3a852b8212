"""Claiming: order, eligibility on the database clock, per-kind caps, indexes, no open transactions."""

from __future__ import annotations

import threading
import time
from datetime import datetime, timedelta, timezone
from typing import Any

import sqlalchemy as sa
from marshmallow import Schema, fields
from sqlalchemy.orm import Session
from support.queues import drain
from support.waiting import Events
from support.workers import enqueue, job_row, running

from venturi_sa import JobContext, Priority, Queue, Task, Worker
from venturi_sa.storage.claim import explain_claim
from venturi_sa.storage.params import ClaimParams


class Label(Schema):
    label = fields.String(required=True)


def test_priority_then_age(engine: sa.Engine, models: Any) -> None:
    order: list[str] = []

    class Step(Task):
        KIND = "step"
        Payload = Label

        def run(self, ctx: JobContext) -> None:
            order.append(self.payload["label"])

    queue = Queue(models, [Step])
    # one transaction each, so created_at (the transaction's start) increases
    for label, priority in [("low-1", Priority.LOW), ("normal-1", None), ("high-1", Priority.HIGH),
                            ("normal-2", Priority.NORMAL), ("low-2", Priority.LOW), ("high-2", Priority.HIGH)]:
        enqueue(engine, queue, Step(label=label), priority=priority)
    drain(queue, engine, concurrency=1)
    assert order == ["high-1", "high-2", "normal-1", "normal-2", "low-1", "low-2"]


def test_task_priority_is_the_default_and_enqueue_overrides_it(engine: sa.Engine, models: Any) -> None:
    class Urgent(Task):
        KIND = "urgent"
        priority = Priority.HIGH

    queue = Queue(models, [Urgent])
    default, overridden = enqueue(engine, queue, Urgent()), enqueue(engine, queue, Urgent(), priority=Priority.LOW)
    assert job_row(engine, models, default[0]).priority == 0
    assert job_row(engine, models, overridden[0]).priority == 2


def test_delayed_job_is_not_claimed_early_and_is_claimed_once_due(engine: sa.Engine, models: Any) -> None:
    started: list[datetime] = []

    class Later(Task):
        KIND = "later"

        def run(self, ctx: JobContext) -> None:
            with engine.connect() as conn:
                started.append(conn.execute(sa.select(sa.func.clock_timestamp())).scalar_one())

    queue = Queue(models, [Later])
    [delayed] = enqueue(engine, queue, Later(), delay=timedelta(seconds=1.5))
    [at] = enqueue(engine, queue, Later(), run_at=datetime.now(timezone.utc) + timedelta(hours=1))
    assert drain(queue, engine) == 0  # nothing is eligible yet
    assert job_row(engine, models, delayed).run_count == 0
    events = Events()
    # the poll interval is far away: the worker must wake for the soonest visible_at by itself
    with running(Worker(queue, engine, poll_interval=60, listen=False, on_event=events)):
        events.wait_for("finished", job_id=delayed, timeout=15)
    row = job_row(engine, models, delayed)
    assert row.status == "completed" and started[0] >= row.visible_at
    assert row.visible_at - row.created_at == timedelta(seconds=1.5)
    assert job_row(engine, models, at).status == "pending"


def test_per_kind_cap_is_never_exceeded(engine: sa.Engine, models: Any) -> None:
    lock = threading.Lock()
    now = {"capped": 0, "free": 0}
    peak = {"capped": 0, "free": 0}

    def observe(kind: str) -> None:
        with lock:
            now[kind] += 1
            peak[kind] = max(peak[kind], now[kind])
        time.sleep(0.05)  # the work; overlapping runs are what the cap limits
        with lock:
            now[kind] -= 1

    class Capped(Task):
        KIND = "capped"
        concurrency = 2

        def run(self, ctx: JobContext) -> None:
            observe("capped")

    class Free(Task):
        KIND = "free"

        def run(self, ctx: JobContext) -> None:
            observe("free")

    queue = Queue(models, [Capped, Free])
    enqueue(engine, queue, *[Capped() for _ in range(24)], *[Free() for _ in range(24)])
    assert drain(queue, engine, concurrency=8) == 48
    assert peak["capped"] == 2
    assert peak["free"] > 2  # the cap is per kind, not for the worker


def test_claim_uses_the_partial_claim_index_without_sorting(engine: sa.Engine, models: Any) -> None:
    jobs = models.jobs_table
    with engine.begin() as conn:
        conn.execute(sa.insert(jobs), [{"id": f"{n:026d}", "kind": f"k{n % 4}", "payload": {},
                                        "priority": n % 3} for n in range(20000)])
        conn.execute(sa.text(f"ANALYZE {jobs.name}"))
    for kinds in (["k1"], ["k1", "k2"]):
        params = ClaimParams(worker_id="explain:1", kinds=kinds, limit=10, leases={},
                             default_lease=timedelta(seconds=60))
        with engine.connect() as conn:
            plan = explain_claim(conn, models, params)
            conn.rollback()
        assert f"{models.prefix}_jobs_claim" in plan, plan
        assert "Sort" not in plan, plan
        assert "Seq Scan" not in plan, plan


def test_no_transaction_stays_open_while_a_handler_runs(pg_url: str, engine: sa.Engine, models: Any) -> None:
    name = f"venturi-{models.prefix}"
    worker_engine = sa.create_engine(pg_url, pool_size=10,
                                     connect_args={"application_name": name, "options": "-c timezone=UTC"})
    seen: dict[str, Any] = {}

    def open_transactions() -> list[int]:
        with engine.connect() as conn:
            return list(conn.execute(sa.text(
                "SELECT pid FROM pg_stat_activity WHERE application_name = :n "
                "AND state LIKE 'idle in transaction%' AND xact_start < clock_timestamp() - interval '300 ms'"),
                {"n": name}).scalars())

    class Plain(Task):
        KIND = "plain"

        def run(self, ctx: JobContext) -> None:
            time.sleep(0.6)  # long enough that any transaction opened before the handler looks old
            seen["plain"] = open_transactions()

    class WithSession(Task):
        KIND = "with_session"

        def run(self, ctx: JobContext) -> None:
            seen["pid"] = ctx.session.execute(sa.select(sa.func.pg_backend_pid())).scalar_one()
            time.sleep(0.6)
            seen["with_session"] = open_transactions()

    queue = Queue(models, [Plain, WithSession])
    enqueue(engine, queue, Plain(), WithSession())
    try:
        assert drain(queue, worker_engine, concurrency=1) == 2
    finally:
        worker_engine.dispose()
    assert seen["plain"] == []
    assert seen["with_session"] == [seen["pid"]]  # only the handler's own ctx.session


def test_claim_is_committed_before_the_handler_runs(engine: sa.Engine, models: Any) -> None:
    seen: list[Any] = []

    class Look(Task):
        KIND = "look"

        def run(self, ctx: JobContext) -> None:
            with Session(engine) as other:  # another connection sees the claim already
                seen.append(other.execute(sa.select(models.Job.status, models.Job.claimed_by,
                                                    models.Job.run_count, models.Job.claim_expires_at)
                                          .where(models.Job.id == ctx.job_id)).one())

    queue = Queue(models, [Look])
    enqueue(engine, queue, Look())
    drain(queue, engine, worker_id="host-a:42")
    [(status, claimed_by, run_count, expires)] = seen
    assert (status, claimed_by, run_count) == ("claimed", "host-a:42", 1) and expires is not None
