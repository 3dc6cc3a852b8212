"""Debounce and throttle at enqueue: the merge and the ``visible_at`` they write, on the database (test) clock."""

from __future__ import annotations

import asyncio
import threading
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
import sqlalchemy as sa
from marshmallow import Schema, fields
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession
from sqlalchemy.orm import Session
from support.async_engines import async_engine_fixture  # noqa: F401 - the async_engine fixture

from venturi_sa import Coalesce, Debounce, Independent, JobContext, Queue, Task, task
from venturi_sa.models import JobBase
from venturi_sa.testing import clock, drain

WINDOW = timedelta(seconds=30)
MAX_WAIT = timedelta(minutes=2)
THROTTLE = timedelta(minutes=1)


class Note(Schema):
    key = fields.String(required=True)
    n = fields.Integer(load_default=0)
    seen = fields.List(fields.Integer(), load_default=list)


class Settle(Task):
    KIND = "settle"
    Payload = Note
    debounce = Debounce(WINDOW)

    def dedup_key(self) -> str:
        return self.payload["key"]

    def run(self, ctx: JobContext) -> None:
        pass


class SettleCapped(Settle):
    KIND = "settle_capped"
    debounce = Debounce(WINDOW, max_wait=MAX_WAIT)


class SettleCollect(Settle):
    """merge() decides: every enqueue's n is kept."""

    KIND = "settle_collect"

    def merge(self, existing: JobBase) -> Coalesce:
        return Coalesce({**self.payload, "seen": [*existing.payload["seen"], self.payload["n"]]})


class SettleApart(Settle):
    KIND = "settle_apart"

    def merge(self, existing: JobBase) -> Independent:
        return Independent()


class Sync(Task):
    KIND = "sync"
    Payload = Note
    throttle = THROTTLE

    def dedup_key(self) -> str:
        return self.payload["key"]

    def run(self, ctx: JobContext) -> None:
        pass


@task("tidy", payload=Note, dedup_key=lambda p: p["key"], debounce=Debounce(WINDOW), throttle=THROTTLE)
def tidy(payload: Any, ctx: JobContext) -> None:
    """Both policies: the later of the two times."""


@pytest.fixture
def queue(models: Any) -> Queue:
    return Queue(models, [Settle, SettleCapped, SettleCollect, SettleApart, Sync, tidy])


def pending(session: Session, models: Any, kind: str) -> list[Any]:
    t = models.jobs_table
    return list(session.execute(sa.select(t).where(t.c.kind == kind, t.c.status == "pending")
                                .order_by(t.c.created_at)))


def record_start(session: Session, models: Any, kind: str, key: str, at: datetime) -> None:
    session.execute(sa.insert(models.throttles_table).values(kind=kind, key=key, began_at=at, job_id="x"))


def test_debounce_moves_the_job_with_each_enqueue_and_the_newest_payload_wins(
        session: Session, models: Any, queue: Queue) -> None:
    c = clock(session)
    t0 = c.freeze()
    first = queue.enqueue(session, Settle(key="a", n=1))
    assert first.visible_at == t0 + WINDOW
    c.advance(timedelta(seconds=20))
    again = queue.enqueue(session, Settle(key="a", n=2))
    assert again.id == first.id and again.visible_at == t0 + timedelta(seconds=20) + WINDOW
    other = queue.enqueue(session, Settle(key="b", n=3))
    [row] = [r for r in pending(session, models, "settle") if r.id == first.id]
    assert row.payload["n"] == 2 and row.visible_at == t0 + timedelta(seconds=50)
    assert other.id != first.id and other.visible_at == t0 + timedelta(seconds=20) + WINDOW
    merged = sa.select(sa.func.count()).where(models.journal_table.c.outcome == "merged")
    assert session.execute(merged).scalar_one() == 1


def test_max_wait_caps_the_delay_from_the_first_enqueue(session: Session, models: Any, queue: Queue) -> None:
    c = clock(session)
    t0 = c.freeze()
    job = queue.enqueue(session, SettleCapped(key="a"))
    for _ in range(5):  # an enqueue every 25 s keeps pushing it back, up to first + max_wait
        c.advance(timedelta(seconds=25))
        job = queue.enqueue(session, SettleCapped(key="a"))
    assert job.visible_at == t0 + MAX_WAIT  # not t0 + 125 s + 30 s
    c.advance(timedelta(seconds=10))  # past max_wait: due now, and a merge keeps it due
    job = queue.enqueue(session, SettleCapped(key="a"))
    assert job.visible_at == t0 + MAX_WAIT and len(pending(session, models, "settle_capped")) == 1


def test_merge_decides_when_the_task_overrides_it(session: Session, models: Any, queue: Queue) -> None:
    clock(session).freeze()
    for n in (1, 2, 3):
        queue.enqueue(session, SettleCollect(key="a", n=n))
    [row] = pending(session, models, "settle_collect")
    assert row.payload["seen"] == [2, 3] and row.payload["n"] == 3
    apart = [queue.enqueue(session, SettleApart(key="a", n=n)) for n in (1, 2)]
    assert len({j.id for j in apart}) == 2  # Independent(): a row of its own, debounced the same way


def test_enqueue_many_merges_within_the_call(session: Session, models: Any, queue: Queue) -> None:
    t0 = clock(session).freeze()
    jobs = queue.enqueue_many(session, [Settle(key="a", n=1), Settle(key="a", n=2), Settle(key="b")])
    assert jobs[0].id == jobs[1].id != jobs[2].id
    [a, _] = pending(session, models, "settle")
    assert a.payload["n"] == 2 and a.visible_at == t0 + WINDOW


def test_a_delay_later_than_the_window_is_kept(session: Session, queue: Queue) -> None:
    t0 = clock(session).freeze()
    assert queue.enqueue(session, Settle(key="a"), delay=timedelta(hours=1)).visible_at == t0 + timedelta(hours=1)
    assert queue.enqueue(session, Settle(key="b"), delay=timedelta(seconds=1)).visible_at == t0 + WINDOW


def test_a_job_waiting_on_parents_is_not_a_merge_target(session: Session, models: Any, queue: Queue) -> None:
    t0 = clock(session).freeze()
    waiting = queue.enqueue(session, Settle(key="a"))
    session.execute(sa.update(models.jobs_table).where(models.jobs_table.c.id == waiting.id)
                    .values(visible_at=sa.literal_column("'infinity'::timestamptz")))
    fresh = queue.enqueue(session, Settle(key="a", n=2))
    assert fresh.id != waiting.id and fresh.visible_at == t0 + WINDOW
    assert session.execute(sa.select(models.jobs_table.c.payload).where(
        models.jobs_table.c.id == waiting.id)).scalar_one()["n"] == 0


def test_throttle_inserts_at_the_last_start_plus_the_window(session: Session, models: Any, queue: Queue) -> None:
    t0 = clock(session).freeze()
    assert queue.enqueue(session, Sync(key="never")).visible_at == t0  # no start recorded: at once
    record_start(session, models, "sync", "a", t0 - timedelta(seconds=15))
    job = queue.enqueue(session, Sync(key="a", n=1))
    assert job.visible_at == t0 + timedelta(seconds=45)
    merged = queue.enqueue(session, Sync(key="a", n=2))  # merged into the pending job, never dropped
    assert merged.id == job.id and merged.visible_at == t0 + timedelta(seconds=45)
    assert [r.payload["n"] for r in pending(session, models, "sync") if r.id == job.id] == [2]
    record_start(session, models, "sync", "old", t0 - timedelta(hours=1))
    assert queue.enqueue(session, Sync(key="old")).visible_at == t0


def test_debounce_and_throttle_together_take_the_later_time(session: Session, models: Any, queue: Queue) -> None:
    t0 = clock(session).freeze()
    record_start(session, models, "tidy", "a", t0)
    assert queue.enqueue(session, tidy(key="a")).visible_at == t0 + THROTTLE  # later than t0 + WINDOW
    assert queue.enqueue(session, tidy(key="b")).visible_at == t0 + WINDOW


def test_drain_runs_a_debounced_job_once_the_clock_passes_it(session: Session, models: Any, queue: Queue) -> None:
    c = clock(session)
    c.freeze()
    queue.enqueue(session, Settle(key="a", n=1))
    queue.enqueue(session, Settle(key="a", n=2))
    assert drain(session, queue).total == 0  # debounced: not due yet
    c.advance(WINDOW)
    result = drain(session, queue)
    assert result.completed == 1 and not pending(session, models, "settle")
    queue.enqueue(session, Settle(key="a", n=3))
    assert drain(session, queue, with_scheduled=True).completed == 1  # with_scheduled reveals it at once


def test_explain_says_debounced_or_throttled_until_when(engine: sa.Engine, models: Any, queue: Queue) -> None:
    with Session(engine) as s, s.begin():
        debounced = queue.enqueue(s, Settle(key="a")).id
        record_start(s, models, "sync", "a", datetime.now(timezone.utc))
        throttled = queue.enqueue(s, Sync(key="a")).id
    [reason] = [r for r in queue.explain(engine, debounced).reasons if r.code == "scheduled"]
    assert reason.text.startswith("scheduled: debounced until ") and reason.until is not None
    [reason] = [r for r in queue.explain(engine, throttled).reasons if r.code == "scheduled"]
    assert "throttled until" in reason.text and "one start per 0:01:00 per key" in reason.text


@pytest.mark.parametrize("task_type", [Settle, Sync])
def test_concurrent_enqueuers_of_one_key_leave_one_job_with_the_last_payload(
        engine: sa.Engine, models: Any, queue: Queue, task_type: type[Task]) -> None:
    """Eight committed enqueuers at once: one pending job, the payload and time of whoever merged last."""
    if task_type is Sync:
        with engine.begin() as conn:
            conn.execute(sa.insert(models.throttles_table).values(
                kind="sync", key="k", began_at=sa.func.now(), job_id="x"))
    barrier = threading.Barrier(8)
    order: list[tuple[int, datetime]] = []  # appended while holding the key's lock: the merge order
    errors: list[BaseException] = []

    def enqueuer(n: int) -> None:
        try:
            with Session(engine) as session:
                barrier.wait(10)
                job = queue.enqueue(session, task_type(key="k", n=n))
                order.append((n, job.visible_at))
                session.commit()
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=enqueuer, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not errors, errors
    with Session(engine) as s:
        [row] = pending(s, models, task_type.KIND)
        started = s.execute(sa.select(models.throttles_table.c.began_at)).scalar()
    last, visible_at = order[-1]
    assert row.payload["n"] == last and row.visible_at == visible_at
    if task_type is Settle:
        assert row.visible_at >= row.created_at + WINDOW
    else:
        assert row.visible_at == started + THROTTLE


def test_the_async_twins_and_ids_only_debounce_the_same_way(engine: sa.Engine, models: Any, queue: Queue,
                                                                async_engine: AsyncEngine) -> None:
    async def main() -> list[str]:
        async with AsyncSession(async_engine) as session, session.begin():
            first = await queue.enqueue_async(session, Settle(key="a", n=1))
            [again] = await queue.enqueue_many_async(session, [Settle(key="a", n=2)])
            return [first.id, again.id]

    ids = asyncio.run(main())
    with Session(engine) as s, s.begin():
        ids += queue.enqueue_many(s, [Settle(key="a", n=3)], ids_only=True)
    with Session(engine) as s:
        [row] = pending(s, models, "settle")
    assert set(ids) == {row.id} and row.payload["n"] == 3
    assert row.visible_at >= row.created_at + WINDOW
