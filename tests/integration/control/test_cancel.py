"""Cancel: pending, claimed-not-started, running sync and async, in the caller's session, racing completion."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from marshmallow import Schema, fields
from sqlalchemy.orm import Session
from support.control import watched
from support.queues import side_rows, side_table, side_write
from support.waiting import WAIT, Events, wait_until
from support.workers import enqueue, job_row, journal, running

from venturi_sa import JobContext, Queue, Task, Worker
from venturi_sa.errors import InvalidTransition, JobNotFound

pytestmark = pytest.mark.timeout(60)
LEASE = timedelta(seconds=3)  # renewal every second


class HoldPayload(Schema):
    obey = fields.Boolean(load_default=True)


class Flags:
    """Per-job events the handlers set and the tests wait on."""

    def __init__(self) -> None:
        self.started: dict[str, threading.Event] = {}
        self.seen: dict[str, float] = {}
        self.async_cancelled: set[str] = set()
        self.calls: list[str] = []

    def event(self, job_id: str) -> threading.Event:
        return self.started.setdefault(job_id, threading.Event())


@pytest.fixture
def flags() -> Flags:
    return Flags()


@pytest.fixture
def setup(engine: sa.Engine, models: Any, prefix: str, flags: Flags) -> Iterator[tuple[Queue, str]]:
    table = side_table(engine, prefix)

    class Hold(Task):
        """Writes through ctx.session, then waits for a cancel; ``obey``: raise, else return normally."""

        KIND = "hold"
        Payload = HoldPayload
        lease = LEASE

        def run(self, ctx: JobContext) -> None:
            flags.calls.append(ctx.job_id)
            side_write(ctx.session, table, ctx.job_id, ctx.run_count)
            flags.event(ctx.job_id).set()
            if ctx.wait_cancelled(WAIT):
                flags.seen[ctx.job_id] = time.monotonic()
            if self.payload.get("obey", True):
                ctx.raise_if_cancelled()

    class HoldAsync(Task):
        KIND = "hold_async"
        lease = LEASE

        async def run(self, ctx: JobContext) -> None:
            await ctx.session_async.execute(sa.text(f"INSERT INTO {table} (job_id, run_no) VALUES (:j, 1)"),
                                            {"j": ctx.job_id})
            flags.event(ctx.job_id).set()
            try:
                await asyncio.sleep(WAIT)
            except asyncio.CancelledError:
                flags.async_cancelled.add(ctx.job_id)
                raise

    class Quick(Task):
        KIND = "quick"
        lease = LEASE

        def run(self, ctx: JobContext) -> None:
            side_write(ctx.session, table, ctx.job_id, ctx.run_count)

    yield Queue(models, [Hold, HoldAsync, Quick]), table


def test_cancel_a_pending_job_ends_it_dead_with_a_journaled_note(engine: sa.Engine, models: Any,
                                                                 setup: tuple[Queue, str]) -> None:
    queue, _ = setup
    [job_id] = enqueue(engine, queue, queue.registry.get("quick")())
    done = queue.cancel(engine, job_id, "duplicate order", actor="alice")
    assert (done.result, done.status) == ("cancelled", "dead")
    row = job_row(engine, models, job_id)
    assert row.status == "dead" and row.finished_at is not None and row.run_count == 0
    [entry] = journal(engine, models, job_id)
    assert (entry.outcome, entry.note) == ("dead", "cancelled by alice: duplicate order")
    with pytest.raises(InvalidTransition, match="already dead"):
        queue.cancel(engine, job_id)
    with pytest.raises(JobNotFound):
        queue.cancel(engine, "no-such-job")
    assert len(journal(engine, models, job_id)) == 1


def test_enqueue_and_cancel_in_one_transaction(engine: sa.Engine, models: Any, setup: tuple[Queue, str]) -> None:
    queue, _ = setup
    with Session(engine) as session:
        job = queue.enqueue(session, queue.registry.get("quick")())
        job_id = job.id
        assert queue.cancel(session, job_id, "changed my mind").result == "cancelled"
        session.rollback()
    with engine.connect() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(models.jobs_table)).scalar_one() == 0
    with Session(engine) as session, session.begin():
        job_id = queue.enqueue(session, queue.registry.get("quick")()).id
        queue.cancel(session, job_id, "never mind")
    assert job_row(engine, models, job_id).status == "dead"
    assert [e.outcome for e in journal(engine, models, job_id)] == ["dead"]


@pytest.mark.parametrize("listen", [True, False], ids=["listen", "poll-only"])
def test_cancel_a_running_sync_handler(engine: sa.Engine, models: Any, setup: tuple[Queue, str], flags: Flags,
                                       listen: bool) -> None:
    """Delivered by NOTIFY, or by the next lease renewal alone; the session work is rolled back."""
    queue, table = setup
    with watched(queue, engine, concurrency=2, listen=listen) as events:
        [job_id] = enqueue(engine, queue, queue.registry.get("hold")())
        assert flags.event(job_id).wait(WAIT)
        asked = time.monotonic()
        assert queue.cancel(engine, job_id, "stop it", actor="bob").result == "requested"
        events.wait_for("finished", job_id=job_id)
    latency = flags.seen[job_id] - asked
    print(f"\ncancel delivery ({'listen' if listen else 'poll-only'}, renewal every 1s): {latency * 1000:.0f} ms")
    row = job_row(engine, models, job_id)
    assert row.status == "dead" and row.failure_count == 0
    [entry] = journal(engine, models, job_id)
    assert (entry.outcome, entry.run_no) == ("dead", 1)
    assert entry.note == "cancelled by bob while running: stop it"
    assert side_rows(engine, table) == []  # ctx.session work rolled back


def test_a_handler_that_ignores_the_cancel_still_ends_cancelled(engine: sa.Engine, models: Any,
                                                                setup: tuple[Queue, str], flags: Flags) -> None:
    queue, table = setup
    with watched(queue, engine) as events:
        [job_id] = enqueue(engine, queue, queue.registry.get("hold")(obey=False))
        assert flags.event(job_id).wait(WAIT)
        queue.cancel(engine, job_id)
        events.wait_for("finished", job_id=job_id)
    assert [(e.outcome, e.note) for e in journal(engine, models, job_id)] == [
        ("dead", "cancelled by operator while running")]
    assert side_rows(engine, table) == []


def test_cancel_a_running_async_handler_cancels_its_task(engine: sa.Engine, models: Any,
                                                         setup: tuple[Queue, str], flags: Flags) -> None:
    queue, table = setup
    with watched(queue, engine) as events:
        [job_id] = enqueue(engine, queue, queue.registry.get("hold_async")())
        assert flags.event(job_id).wait(WAIT)
        queue.cancel(engine, job_id, "async stop")
        events.wait_for("finished", job_id=job_id)
    wait_until(lambda: job_id in flags.async_cancelled, what="the task's CancelledError")
    assert [(e.outcome, e.note) for e in journal(engine, models, job_id)] == [
        ("dead", "cancelled by operator while running: async stop")]
    assert side_rows(engine, table) == []


def test_cancel_a_claimed_job_before_its_handler_starts(engine: sa.Engine, models: Any,
                                                        setup: tuple[Queue, str], flags: Flags) -> None:
    """The ``claimed`` hook runs before the run reaches an executor: the cancel lands in between."""
    queue, _ = setup
    events = Events()
    worker = Worker(queue, engine, concurrency=1, poll_interval=0.2, listen=False, on_event=events)

    def cancel_then_wait(data: dict[str, Any]) -> None:
        job_id = data["job_id"]
        assert queue.cancel(engine, job_id, "not yet started").result == "requested"

        def delivered() -> bool:
            fences = frozenset(f for held in worker.inflight.held().values() for f in held if f.job_id == job_id)
            return bool(fences) and all(r.ctx.cancelled for r in worker.inflight.find(fences))

        wait_until(delivered, what="the cancel's delivery by lease renewal")

    events.hooks["claimed"] = cancel_then_wait
    with running(worker):
        [job_id] = enqueue(engine, queue, queue.registry.get("hold")())
        events.wait_for("finished", job_id=job_id)
    assert job_id not in flags.calls  # the handler never ran
    assert [(e.outcome, e.note) for e in journal(engine, models, job_id)] == [
        ("dead", "cancelled by operator while running: not yet started")]


def test_cancel_racing_completion_records_exactly_one_outcome(engine: sa.Engine, models: Any,
                                                              setup: tuple[Queue, str]) -> None:
    """Cancels of every job while a worker completes them: each job ends once, fenced, never both."""
    queue, table = setup
    ids = enqueue(engine, queue, *[queue.registry.get("quick")() for _ in range(40)])
    results: dict[str, str] = {}

    def cancel_all() -> None:
        for job_id in ids:
            try:
                results[job_id] = queue.cancel(engine, job_id, "race").result
            except InvalidTransition:
                results[job_id] = "too late"

    with watched(queue, engine, concurrency=4):
        canceller = threading.Thread(target=cancel_all)
        canceller.start()
        canceller.join(WAIT)
        wait_until(lambda: all(job_row(engine, models, j).status in ("completed", "dead") for j in ids),
                   what="every job to end")
    written = {r.job_id for r in side_rows(engine, table)}
    for job_id in ids:
        row = job_row(engine, models, job_id)
        entries = [e for e in journal(engine, models, job_id) if e.outcome in ("completed", "dead")]
        assert len(entries) == 1, (job_id, entries)
        if row.status == "dead":
            assert entries[0].note.startswith("cancelled by operator") and job_id not in written
            assert results[job_id] in ("cancelled", "requested")
        else:
            assert entries[0].outcome == "completed" and job_id in written
            assert results[job_id] in ("too late", "requested")
