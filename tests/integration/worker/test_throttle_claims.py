"""Throttle in the claim: one start per window per key, for new jobs, retries and concurrent claimers."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from marshmallow import Schema, fields
from sqlalchemy.orm import Session
from support.waiting import wait_until
from support.workers import enqueue, job_row

from venturi_sa import Independent, JobContext, Queue, Task
from venturi_sa.models import JobBase
from venturi_sa.storage.backend import backend_for
from venturi_sa.storage.params import ClaimedJob, ClaimParams
from venturi_sa.testing import clock

WINDOW = timedelta(minutes=1)


class Keyed(Schema):
    key = fields.String(required=True)
    n = fields.Integer(load_default=0)


class Sync(Task):
    """Throttled, and every enqueue its own row, so that two jobs of one key can both be eligible."""

    KIND = "sync"
    Payload = Keyed
    throttle = WINDOW

    def dedup_key(self) -> str:
        return self.payload["key"]

    def merge(self, existing: JobBase) -> Independent:
        return Independent()

    def run(self, ctx: JobContext) -> None:
        pass


@pytest.fixture
def queue(models: Any) -> Queue:
    return Queue(models, [Sync])


def claim(runner: Any, queue: Queue, worker: str = "w:1", limit: int = 10) -> list[ClaimedJob]:
    params = ClaimParams(worker_id=worker, kinds=["sync"], limit=limit, leases={}, default_lease=WINDOW,
                         throttles={"sync": WINDOW})
    return backend_for(queue.models).claim(runner, params)


def start_of(runner: Any, models: Any, key: str) -> Any:
    t = models.throttles_table
    return runner.execute(sa.select(t.c.began_at, t.c.job_id).where(t.c["key"] == key)).one()


def test_one_start_per_key_in_a_claim_and_the_others_wait_a_window(session: Session, models: Any,
                                                                   queue: Queue) -> None:
    c = clock(session)
    t0 = c.freeze()
    first, second = (queue.enqueue(session, Sync(key="a", n=n)).id for n in (1, 2))
    other = queue.enqueue(session, Sync(key="b")).id
    got = claim(session, queue)
    assert {j.id for j in got} == {first, other}  # the older job of "a" starts; "b" is another key
    assert tuple(start_of(session, models, "a")) == (t0, first)
    back = session.execute(sa.select(models.jobs_table).where(models.jobs_table.c.id == second)).one()
    assert (back.status, back.run_count, back.claimed_by, back.visible_at) == ("pending", 0, None, t0 + WINDOW)
    c.advance(WINDOW - timedelta(seconds=1))
    assert claim(session, queue) == []
    c.advance(timedelta(seconds=1))
    assert [j.id for j in claim(session, queue)] == [second]
    assert tuple(start_of(session, models, "a")) == (t0 + WINDOW, second)


def test_a_batch_short_of_sent_back_jobs_is_filled_with_other_keys(session: Session, queue: Queue) -> None:
    clock(session).freeze()
    a1, a2, a3 = (queue.enqueue(session, Sync(key="a", n=n)).id for n in (1, 2, 3))
    b1, c1 = (queue.enqueue(session, Sync(key=k)).id for k in ("b", "c"))
    got = claim(session, queue, limit=3)  # a1, a2, a3 first; a2 and a3 go back; the batch is refilled
    assert [j.id for j in got] == [a1, b1, c1]


def test_a_retry_of_the_same_job_waits_for_the_window_too(session: Session, models: Any, queue: Queue) -> None:
    c = clock(session)
    t0 = c.freeze()
    job = queue.enqueue(session, Sync(key="a")).id
    [run] = claim(session, queue)
    c.advance(timedelta(seconds=5))
    session.execute(sa.update(models.jobs_table).where(models.jobs_table.c.id == job)  # a retry due at once
                    .values(status="pending", claimed_by=None, visible_at=sa.func.now()))
    assert claim(session, queue) == []
    row = session.execute(sa.select(models.jobs_table).where(models.jobs_table.c.id == job)).one()
    assert (row.status, row.run_count, row.visible_at) == ("pending", run.run_count, t0 + WINDOW)


def test_a_job_without_a_key_is_not_throttled(session: Session, models: Any, queue: Queue) -> None:
    session.add_all([models.Job(kind="sync", payload={"key": "x"}) for _ in range(2)])  # dedup_key NULL
    session.flush()
    assert len(claim(session, queue)) == 2
    assert session.execute(sa.select(sa.func.count()).select_from(models.throttles_table)).scalar_one() == 0


def test_concurrent_claimers_of_one_key_start_it_once(engine: sa.Engine, models: Any, queue: Queue) -> None:
    """The second claimer's upsert waits on the first's uncommitted start, then sees it and sends its job back."""
    first, second = enqueue(engine, queue, Sync(key="a", n=1), Sync(key="a", n=2))
    results: list[list[ClaimedJob]] = []
    with engine.connect() as a:
        with a.begin():
            got_a = claim(a, queue, "a:1", limit=1)
            assert [j.id for j in got_a] == [first]
            b = threading.Thread(target=lambda: results.append(engine_claim(engine, queue)))
            b.start()
            wait_until(lambda: waiting_on_a_lock(engine), what="the second claimer waits on the first's start")
        b.join(30)
    assert results == [[]]
    row = job_row(engine, models, second)
    with engine.connect() as conn:
        began_at, by = start_of(conn, models, "a")
    assert (row.status, row.run_count, row.visible_at, by) == ("pending", 0, began_at + WINDOW, first)


def engine_claim(engine: sa.Engine, queue: Queue) -> list[ClaimedJob]:
    with engine.begin() as conn:
        return claim(conn, queue, "b:1")


def waiting_on_a_lock(engine: sa.Engine) -> bool:
    with engine.connect() as conn:
        return bool(conn.execute(sa.text(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()"
        )).scalar_one())
