"""Dedup (ADR 10): the oldest pending sibling absorbs coalesced enqueues, serialized per key."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from marshmallow import Schema, fields
from sqlalchemy.orm import Session
from support.factories import factories_for
from support.queues import count, drain
from support.workers import enqueue, job_row, journal

from venturi_sa import Coalesce, Independent, JobContext, Pause, Queue, Task
from venturi_sa.models import JobBase


class Refresh(Schema):
    account = fields.Integer(required=True)
    reasons = fields.List(fields.String(), load_default=list)


class RefreshAccount(Task):
    """Default merge: coalesce, keeping the existing payload."""

    KIND = "refresh"
    Payload = Refresh

    def dedup_key(self) -> str:
        return f"account:{self.payload['account']}"

    def run(self, ctx: JobContext) -> None:
        pass


class CollectReasons(RefreshAccount):
    """Coalesce with a merged payload."""

    KIND = "collect"

    def merge(self, existing: JobBase) -> Coalesce:
        return Coalesce({**existing.payload, "reasons": existing.payload["reasons"] + self.payload["reasons"]})


class KeepAll(RefreshAccount):
    """Dedup key set, but every enqueue stays its own job."""

    KIND = "keep_all"

    def merge(self, existing: JobBase) -> Independent:
        return Independent()


class PausesOnce(RefreshAccount):
    KIND = "pauses_once"

    def run(self, ctx: JobContext) -> Any:
        return Pause(delay=timedelta(hours=1)) if ctx.run_count == 1 else None


@pytest.fixture
def queue(models: Any) -> Queue:
    return Queue(models, [RefreshAccount, CollectReasons, KeepAll, PausesOnce])


def pending(engine: sa.Engine, models: Any, kind: str) -> list[sa.Row[Any]]:
    t = models.jobs_table
    with engine.connect() as conn:
        return list(conn.execute(sa.select(t).where(t.c.kind == kind, t.c.status == "pending")
                                 .order_by(t.c.created_at)))


def test_default_merge_coalesces_and_keeps_the_existing_payload(engine: sa.Engine, models: Any,
                                                                queue: Queue) -> None:
    [first] = enqueue(engine, queue, RefreshAccount(account=1, reasons=["signup"]))
    [second] = enqueue(engine, queue, RefreshAccount(account=1, reasons=["login"]))
    [other] = enqueue(engine, queue, RefreshAccount(account=2))
    assert second == first and other != first
    [row, _] = pending(engine, models, "refresh")
    assert row.id == first and row.payload == {"account": 1, "reasons": ["signup"]}
    [entry] = journal(engine, models, first)
    assert (entry.outcome, entry.run_no) == ("merged", 0) and "account:1" in entry.note


def test_coalesce_with_a_merged_payload_within_and_across_transactions(engine: sa.Engine, models: Any,
                                                                       queue: Queue) -> None:
    ids = enqueue(engine, queue, CollectReasons(account=1, reasons=["a"]), CollectReasons(account=1, reasons=["b"]))
    ids += enqueue(engine, queue, CollectReasons(account=1, reasons=["c"]))
    assert len(set(ids)) == 1
    [row] = pending(engine, models, "collect")
    assert row.payload == {"account": 1, "reasons": ["a", "b", "c"]}
    assert [e.outcome for e in journal(engine, models, row.id)] == ["merged", "merged"]


def test_independent_inserts_beside_the_sibling(engine: sa.Engine, models: Any, queue: Queue) -> None:
    ids = enqueue(engine, queue, KeepAll(account=1), KeepAll(account=1))
    ids += enqueue(engine, queue, KeepAll(account=1))
    assert len(set(ids)) == 3 and len(pending(engine, models, "keep_all")) == 3
    assert count(engine, models.journal_table) == 0


def test_merged_row_uses_the_survivors_run_count(engine: sa.Engine, models: Any, queue: Queue) -> None:
    [job_id] = enqueue(engine, queue, PausesOnce(account=1))
    drain(queue, engine)  # run 1 pauses: pending again with run_count 1
    assert enqueue(engine, queue, PausesOnce(account=1)) == [job_id]
    assert [(e.outcome, e.run_no) for e in journal(engine, models, job_id)] == [("paused", 1), ("merged", 1)]


@pytest.mark.parametrize("state", ["claimed", "completed", "dead", "expired"])
def test_never_merges_into_a_job_that_is_not_pending(engine: sa.Engine, models: Any, queue: Queue,
                                                    state: str) -> None:
    with Session(engine) as session, session.begin():
        JobFactory, _ = factories_for(models, session)
        old = JobFactory(kind="refresh", payload={"account": 1, "reasons": []}, dedup_key="account:1",
                         **{state: True}).id
    [new] = enqueue(engine, queue, RefreshAccount(account=1))
    assert new != old
    assert job_row(engine, models, old).status == ("claimed" if state == "expired" else state)
    assert journal(engine, models, old) == []


def test_a_job_claimed_while_an_enqueuer_looks_is_not_merged_into(engine: sa.Engine, models: Any,
                                                                  queue: Queue) -> None:
    [first] = enqueue(engine, queue, RefreshAccount(account=1))
    with Session(engine) as claimer:  # a worker mid-claim holds the row lock
        claimer.execute(sa.update(models.Job).where(models.Job.id == first)
                        .values(status="claimed", claimed_by="w:1", run_count=1)
                        .execution_options(synchronize_session=False))
        result: list[str] = []
        enqueuer = threading.Thread(target=lambda: result.extend(enqueue(engine, queue, RefreshAccount(account=1))))
        enqueuer.start()
        enqueuer.join(0.5)
        assert enqueuer.is_alive()  # waiting for the row lock, not guessing
        claimer.commit()
    enqueuer.join(20)
    assert result and result[0] != first


@pytest.mark.parametrize(("task_type", "expected_rows"), [(RefreshAccount, 1), (CollectReasons, 1), (KeepAll, 8)])
def test_eight_concurrent_enqueuers_of_one_key(engine: sa.Engine, models: Any, queue: Queue,
                                                task_type: type[Task], expected_rows: int) -> None:
    barrier = threading.Barrier(8)
    errors: list[BaseException] = []

    def enqueuer(n: int) -> None:
        try:
            with Session(engine) as session:
                barrier.wait(10)
                queue.enqueue(session, task_type(account=1, reasons=[f"r{n}"]))
                session.commit()
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=enqueuer, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not errors, errors
    rows = pending(engine, models, task_type.KIND)
    assert len(rows) == expected_rows
    merged = count(engine, models.journal_table, "WHERE outcome = 'merged'")
    assert merged == 8 - expected_rows
    if task_type is CollectReasons:  # every enqueue's reason made it into the survivor
        assert sorted(rows[0].payload["reasons"]) == [f"r{n}" for n in range(8)]


class EmptyKey(RefreshAccount):
    """An empty string is a dedup key like any other; only ``None`` never merges."""

    KIND = "empty_key"

    def dedup_key(self) -> str:
        return ""


def test_an_empty_dedup_key_still_deduplicates(engine: sa.Engine, models: Any) -> None:
    queue = Queue(models, [EmptyKey])
    ids = enqueue(engine, queue, EmptyKey(account=1), EmptyKey(account=2))
    ids += enqueue(engine, queue, EmptyKey(account=3))
    assert len(set(ids)) == 1 and len(pending(engine, models, "empty_key")) == 1
