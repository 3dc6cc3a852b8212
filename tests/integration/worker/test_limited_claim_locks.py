"""Locks held elsewhere never stall the limited claim: a row lock is skipped, a kind's lock is tried, not waited
for (only that kind waits), and a frozen claimer's lock is ended by the server."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from marshmallow import Schema, fields
from sqlalchemy.orm import Session
from sqlalchemy.pool import NullPool
from support.waiting import wait_until
from support.workers import enqueue, running

from venturi_sa import Queue, Task, Worker
from venturi_sa.storage import limited_claim
from venturi_sa.storage.backend import backend_for
from venturi_sa.storage.params import ClaimedJob, ClaimParams, SoonestParams
from venturi_sa.task import declared_limits_of


class Tenant(Schema):
    tenant = fields.String(required=True)


def _tasks(done: list[str]) -> tuple[type[Task], type[Task]]:
    lock = threading.Lock()

    class Export(Task):
        KIND = "locked_export"
        Payload = Tenant
        key_concurrency = 1

        def limit_key(self) -> str | None:
            return str(self.payload["tenant"])

        def run(self, ctx: Any) -> None:
            with lock:
                done.append(ctx.job_id)

    class Plain(Task):
        KIND = "locked_plain"

        def run(self, ctx: Any) -> None:
            with lock:
                done.append(ctx.job_id)

    return Export, Plain


def _claim(engine: sa.Engine, models: Any, tasks: list[type[Task]]) -> list[ClaimedJob]:
    params = ClaimParams(worker_id="w:1", kinds=[t.KIND for t in tasks], limit=100, leases={},
                         default_lease=timedelta(seconds=60), limits=declared_limits_of(tasks))
    with engine.begin() as conn:
        conn.execute(sa.text("SET LOCAL lock_timeout = '5s'"))  # a claim that waited would fail, not hang the test
        return limited_claim.claim(models, conn, params)


@pytest.fixture
def kind_lock(engine: sa.Engine, models: Any) -> Iterator[sa.Connection]:
    """A connection holding ``locked_export``'s claim lock in an open transaction (rolled back at the end)."""
    with engine.connect() as conn:
        key = limited_claim.lock_key(models, "locked_export")
        assert conn.execute(sa.select(sa.func.pg_try_advisory_xact_lock(sa.func.hashtextextended(key, 0)))
                            ).scalar_one()
        yield conn
        conn.rollback()


def test_a_pending_row_locked_for_share_by_an_enqueue_stalls_no_claim(engine: sa.Engine, models: Any) -> None:
    done: list[str] = []
    Export, Plain = _tasks(done)
    queue = Queue(models, [Export, Plain])
    [parent] = enqueue(engine, queue, Export(tenant="a"))
    others = enqueue(engine, queue, Export(tenant="a"), Export(tenant="a"), Export(tenant="b"),
                     *[Plain() for _ in range(6)])
    with Session(engine) as caller:  # the caller's transaction holds the parent FOR SHARE until it ends
        queue.enqueue(caller, Plain(), after=[parent])
        workers = [Worker(queue, engine, concurrency=4, poll_interval=0.2) for _ in range(2)]
        with running(workers[0]), running(workers[1]):
            wait_until(lambda: set(others) <= set(done), what="every job but the locked one")
            assert parent not in done  # the locked row is skipped, and tenant a's next jobs ran past it
            caller.rollback()
            wait_until(lambda: parent in done, what="the parent, once its lock is gone")


def test_a_held_kind_lock_leaves_out_that_kind_only(engine: sa.Engine, models: Any,
                                                     kind_lock: sa.Connection) -> None:
    Export, Plain = _tasks([])
    queue = Queue(models, [Export, Plain])
    enqueue(engine, queue, Export(tenant="a"), *[Plain() for _ in range(3)])
    claimed = _claim(engine, models, [Export, Plain])
    assert sorted(j.kind for j in claimed) == ["locked_plain"] * 3
    with engine.begin() as conn:  # the worker asks again soon, not after its poll interval
        wait = backend_for(models).soonest_visible(conn, SoonestParams(kinds=["locked_export"]))
    assert wait == limited_claim.BUSY_RETRY
    kind_lock.rollback()
    [export] = _claim(engine, models, [Export, Plain])
    assert export.kind == "locked_export"
    with engine.begin() as conn:
        assert backend_for(models).soonest_visible(conn, SoonestParams(kinds=["locked_export"])) is None


def test_workers_drain_other_kinds_under_a_held_kind_lock_then_that_kind_without_a_poll(
        engine: sa.Engine, models: Any, kind_lock: sa.Connection) -> None:
    done: list[str] = []
    Export, Plain = _tasks(done)
    queue = Queue(models, [Export, Plain])
    exports = enqueue(engine, queue, Export(tenant="a"), Export(tenant="b"))
    plains = enqueue(engine, queue, *[Plain() for _ in range(6)])
    worker = Worker(queue, engine, concurrency=4, poll_interval=60.0)  # a poll would outlast the test
    with running(worker):
        wait_until(lambda: set(plains) <= set(done), what="every unlimited job under the held lock")
        assert not set(exports) & set(done)
        kind_lock.rollback()  # no NOTIFY: the worker must come back on its own, soon
        wait_until(lambda: set(exports) <= set(done), timeout=10.0, what="the limited kind once its lock is free")


def test_the_server_ends_a_frozen_claimers_transaction_and_its_lock(engine: sa.Engine, models: Any,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    Export, Plain = _tasks([])
    queue = Queue(models, [Export])
    enqueue(engine, queue, Export(tenant="a"), Export(tenant="b"))
    frozen_engine = sa.create_engine(engine.url, poolclass=NullPool, connect_args={"options": "-c timezone=UTC"})
    frozen = frozen_engine.connect()
    try:
        params = ClaimParams(worker_id="frozen:1", kinds=["locked_export"], limit=1, leases={},
                             default_lease=timedelta(seconds=60), limits=declared_limits_of([Export]))
        # Once with the usual timeout, rolled back: the claim's statements are compiled (new tables for each
        # test) before the short timeout, which the server would otherwise apply to a compile's idle gap.
        assert len(limited_claim.claim(models, frozen, params)) == 1
        frozen.rollback()
        monkeypatch.setattr(limited_claim, "HOLD_TIMEOUT_MS", 1000, raising=False)
        assert len(limited_claim.claim(models, frozen, params)) == 1  # then it never commits: frozen
        assert _claim(engine, models, [Export]) == []  # its lock is held: the kind is left out
        claimed = wait_until(lambda: _claim(engine, models, [Export]), what="the frozen claimer's lock to go")
        assert len(claimed) == 2  # its claim was rolled back with it: both jobs are claimable again
        with pytest.raises(sa.exc.OperationalError):
            frozen.execute(sa.select(1))
    finally:
        frozen.invalidate()
        frozen.close()
        frozen_engine.dispose()
