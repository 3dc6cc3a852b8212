"""A caller's transaction that locks a job's row (``after=``, ``signal``, ``cancel``) and stays open.

It never costs a running job its lease (the renewal is not held back by it),
and no release or wake-up is lost: what must see the caller's rows waits for
its commit.
"""

from __future__ import annotations

import threading
from datetime import datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.orm import Session
from support.control import watched
from support.waiting import WAIT, wait_until
from support.workers import enqueue, job_row, journal

from venturi_sa import JobContext, Queue, Task
from venturi_sa.states import Outcome
from venturi_sa.storage import claim as claims
from venturi_sa.storage import outcomes
from venturi_sa.storage.params import ClaimParams, FinishManyParams, FinishParams

pytestmark = pytest.mark.timeout(60)

LEASE = timedelta(seconds=2)


def _db_now(session: Session) -> datetime:
    now: datetime = session.execute(sa.select(sa.func.clock_timestamp())).scalar_one()
    return now


def _expires(engine: sa.Engine, models: Any, job_id: str) -> datetime | None:
    with engine.connect() as conn:
        value: datetime | None = conn.execute(sa.select(models.Job.claim_expires_at).where(
            models.Job.id == job_id)).scalar_one()
        return value


@pytest.mark.parametrize("hold", ["after", "signal", "cancel"])
def test_a_caller_transaction_open_for_leases_does_not_cost_the_running_job_its_lease(
        engine: sa.Engine, models: Any, hold: str) -> None:
    started, finish, cancelled = threading.Event(), threading.Event(), threading.Event()
    runs: list[int] = []

    class Long(Task):
        KIND = "long"
        lease = LEASE

        def run(self, ctx: JobContext) -> None:
            runs.append(ctx.run_count)
            started.set()
            while not finish.wait(0.02):  # the handler's own cooperative check
                if ctx.cancelled:
                    cancelled.set()

    class Child(Task):
        KIND = "child"

        def run(self, ctx: JobContext) -> None:
            pass

    queue = Queue(models, [Long, Child])
    with watched(queue, engine, concurrency=2, recover_interval=0.1) as events:
        [job_id] = enqueue(engine, queue, Long())
        assert started.wait(WAIT)
        with Session(engine) as caller, caller.begin():
            if hold == "after":
                queue.enqueue(caller, Child(), after=[job_id])
            elif hold == "signal":
                assert queue.signal(caller, job_id, "go", 1).result == "stored"
            else:
                assert queue.cancel(caller, job_id).result == "requested"
            locked_at = _db_now(caller)
            # Held for more than two leases: renewed all the while (without renewal it expires at once).
            wait_until(lambda: (_expires(engine, models, job_id) or locked_at) > locked_at + 2 * LEASE,
                       timeout=4 * LEASE.total_seconds() + 2, what="renewals while the caller holds the lock")
            assert job_row(engine, models, job_id).status == "claimed"
        if hold == "cancel":
            assert cancelled.wait(WAIT)  # delivered once the caller committed
        finish.set()
        events.wait_for("finished", job_id=job_id, recorded=True)
    # The run that started is the only one, and its outcome the last entry.  A claim lost before its handler
    # started (a loaded machine stalled the hand-off past the lease) is recovered and journaled as such: that
    # is not what this test is about, and it happens before the caller's transaction opens.
    assert len(runs) == 1
    entries = [(e.outcome, e.run_no) for e in journal(engine, models, job_id)]
    assert entries[-1] == (Outcome.DEAD.value if hold == "cancel" else Outcome.COMPLETED.value, runs[0])
    assert entries[:-1] == [(Outcome.STALE_RECOVERED.value, n) for n in range(1, runs[0])]


def _claim(engine: sa.Engine, models: Any, kind: str) -> Any:
    with Session(engine) as s, s.begin():
        [job] = claims.claim(models, s, ClaimParams(worker_id="w:1", kinds=[kind], limit=1, leases={},
                                                    default_lease=timedelta(minutes=5)))
        return job


def _lock_waits(engine: sa.Engine, like: str) -> int:
    with engine.connect() as conn:
        return int(conn.execute(sa.text(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE :q"),
            {"q": like}).scalar_one())


def _infinite(engine: sa.Engine, models: Any, job_id: str) -> bool:
    with engine.connect() as conn:
        return bool(conn.execute(sa.select(models.Job.visible_at == sa.literal("infinity", sa.DateTime(
            timezone=True))).where(models.Job.id == job_id)).scalar_one())


class Parent(Task):
    KIND = "parent"


class Child(Task):
    KIND = "child"


@pytest.mark.parametrize("ends", [Outcome.COMPLETED, Outcome.DEAD])
def test_a_parent_ending_while_an_after_enqueue_is_open_waits_for_it_and_settles_its_dependent(
        engine: sa.Engine, models: Any, ends: Outcome) -> None:
    queue = Queue(models, [Parent, Child])
    [parent] = enqueue(engine, queue, Parent())
    job = _claim(engine, models, "parent")
    written: list[dict[Any, Outcome]] = []

    def finish() -> None:
        with Session(engine) as s, s.begin():
            written.append(outcomes.finish_many(models, s, FinishManyParams(
                outcomes=[FinishParams(fence=job.fence, outcome=ends)])))

    with Session(engine) as caller, caller.begin():
        child = queue.enqueue(caller, Child(), after=[parent]).id
        writer = threading.Thread(target=finish)
        writer.start()
        wait_until(lambda: _lock_waits(engine, "%FOR UPDATE%"), what="the outcome write to wait for the enqueue")
    writer.join(WAIT)
    assert written == [{job.fence: ends}]
    row = job_row(engine, models, child)
    if ends is Outcome.COMPLETED:
        assert row.status == "pending" and not _infinite(engine, models, child)  # released
    else:
        assert row.status == "dead"  # killed under the default "cancel" policy


def test_a_dependent_killed_down_the_chain_waits_for_an_open_enqueue_naming_it(engine: sa.Engine,
                                                                              models: Any) -> None:
    """Settle locks the dependents it killed before settling theirs: a grandchild being enqueued is killed too."""
    queue = Queue(models, [Parent, Child])
    [parent] = enqueue(engine, queue, Parent())
    [child] = enqueue(engine, queue, Child(), after=[parent])
    job = _claim(engine, models, "parent")

    def die() -> None:
        with Session(engine) as s, s.begin():
            outcomes.finish_many(models, s, FinishManyParams(outcomes=[FinishParams(fence=job.fence,
                                                                                    outcome=Outcome.DEAD)]))

    with Session(engine) as caller, caller.begin():
        grandchild = queue.enqueue(caller, Child(), after=[child]).id
        writer = threading.Thread(target=die)
        writer.start()
        wait_until(lambda: _lock_waits(engine, "%FOR UPDATE%"), what="the kill to wait for the enqueue")
    writer.join(WAIT)
    assert job_row(engine, models, child).status == "dead"
    assert job_row(engine, models, grandchild).status == "dead"


def test_a_cancel_of_a_pending_parent_waits_for_an_open_enqueue_naming_it(engine: sa.Engine, models: Any) -> None:
    queue = Queue(models, [Parent, Child])
    [parent] = enqueue(engine, queue, Parent())
    done: list[str] = []
    with Session(engine) as caller, caller.begin():
        child = queue.enqueue(caller, Child(), after=[parent]).id
        canceller = threading.Thread(target=lambda: done.append(queue.cancel(engine, parent).result))
        canceller.start()
        wait_until(lambda: _lock_waits(engine, "%FOR UPDATE%"), what="the cancel to wait for the enqueue")
    canceller.join(WAIT)
    assert done == ["cancelled"]
    assert job_row(engine, models, child).status == "dead"
