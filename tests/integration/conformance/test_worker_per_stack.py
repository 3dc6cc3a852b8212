"""Conformance of the whole worker, per stack: {sync, async} worker × {psycopg2, psycopg 3, asyncpg}.

``app_engine`` is what the Worker gets: a sync ``Engine`` (its claims,
outcomes, lease renewals and LISTEN through psycopg2 or psycopg 3) or an
``AsyncEngine`` (the same through asyncpg or psycopg 3 async, on the worker
loop).  Handlers follow the stack: ``def run`` with ``ctx.session``, or
``async def run`` with ``ctx.session_async`` (see ``support.stacks.handler``).
The test seeds and reads through ``engine``, a sync engine.  The two
combinations no driver offers are refused when built.  Waits are on the
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
from marshmallow import Schema, fields
from sqlalchemy.orm import Session
from support.drivers import UNSUPPORTED, Engines, Stack, driver_url
from support.factories import factories_for
from support.queues import drain, side_rows, side_table, side_write
from support.stacks import app_engine_fixture, engine_fixture, handler, refused_without_async_api, stack_fixture  # noqa: F401 - fixtures
from support.waiting import WAIT, Events, wait_until
from support.workers import enqueue, job_row, journal, running, steal

from venturi_sa import Complete, Die, JobContext, Pause, Queue, Retry, Task, Worker, make_models


class Script(Schema):
    action = fields.String(required=True)
    n = fields.Integer(load_default=0)
    text = fields.String(load_default="é")


class Step(Schema):
    step = fields.Integer(required=True)


def scripted(stack: Stack, side: str, ran: list[tuple[str, int]] | None = None) -> type[Task]:
    """A task whose payload says what its handler returns; each run writes a side row in its session."""

    def act(self: Task, ctx: JobContext, session: Session | None) -> Any:
        assert session is not None
        action = self.payload["action"]
        if ran is not None:
            ran.append((action, self.payload["n"]))
        side_write(session, side, ctx.job_id, ctx.run_count, action)
        if action == "complete":
            return {"rows": [1, 2.5], "text": self.payload["text"]}  # the run's attachment
        if action == "pause":
            ctx.carry = {"step": (ctx.carry or {"step": 0})["step"] + 1}
            return Pause(delay=timedelta(hours=1), note="later")
        if action == "retry":
            return Retry("again", delay=timedelta(hours=1))
        if action == "die":
            return Die("hopeless")
        raise ValueError("the disk is full")

    return type("Scripted", (Task,), {"KIND": "scripted", "Payload": Script, "Carry": Step,
                                      "run": handler(stack, act), "max_failures": 3})


def statements_of(app_engine: Any) -> tuple[sa.Engine, list[str]]:
    """The sync core of ``app_engine`` (an AsyncEngine's ``sync_engine``) and a list its statements go to."""
    core = app_engine if isinstance(app_engine, sa.Engine) else app_engine.sync_engine
    return core, []


def test_claim_order_is_priority_then_age_through_the_stacks_driver(stack: Stack, app_engine: Any,
                                                                     engine: sa.Engine, models: Any,
                                                                     prefix: str) -> None:
    ran: list[tuple[str, int]] = []
    T = scripted(stack, side_table(engine, prefix), ran)
    queue = Queue(models, [T])
    enqueue(engine, queue, T(action="complete", n=1), priority=2)
    enqueue(engine, queue, T(action="complete", n=2))
    enqueue(engine, queue, T(action="complete", n=3), priority=0)
    enqueue(engine, queue, T(action="complete", n=4))
    core, seen = statements_of(app_engine)

    def record(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        seen.append(statement)

    sa.event.listen(core, "before_cursor_execute", record)
    try:
        worker = Worker(queue, app_engine, concurrency=1, batch_size=1, poll_interval=0.2)
        assert worker.run_until_idle() == 4
    finally:
        sa.event.remove(core, "before_cursor_execute", record)
    assert [n for _, n in ran] == [3, 2, 4, 1]
    # the claims and outcomes went through the stack's own engine and driver; nothing was derived
    assert any("SKIP LOCKED" in s for s in seen) and any(models.journal_table.name in s for s in seen)
    assert worker.engines.derived() == []
    assert (core.dialect.driver, core.dialect.is_async) == (stack.driver, stack.is_async)


def test_every_outcome_commits_its_session_work_exactly_once(stack: Stack, app_engine: Any, engine: sa.Engine,
                                                              models: Any, prefix: str) -> None:
    side = side_table(engine, prefix)
    T = scripted(stack, side)
    queue = Queue(models, [T])
    ids = dict(zip(["complete", "pause", "retry", "die", "raise"],
                   enqueue(engine, queue, *(T(action=a) for a in ["complete", "pause", "retry", "die", "raise"])),
                   strict=True))
    assert drain(queue, app_engine) == 5
    rows = {action: job_row(engine, models, job_id) for action, job_id in ids.items()}
    got = {a: (r.status, r.failure_count, r.finished_at is not None) for a, r in rows.items()}
    assert got == {"complete": ("completed", 0, True), "pause": ("pending", 0, False),
                   "retry": ("pending", 1, False), "die": ("dead", 0, True), "raise": ("pending", 1, False)}
    assert rows["pause"].carry == {"step": 1} and rows["complete"].payload["text"] == "é"
    assert rows["pause"].visible_at - rows["pause"].created_at > timedelta(minutes=59)
    entries = {a: [(e.outcome, e.run_no) for e in journal(engine, models, i)] for a, i in ids.items()}
    assert entries == {"complete": [("completed", 1)], "pause": [("paused", 1)], "retry": [("retried", 1)],
                       "die": [("dead", 1)], "raise": [("retried", 1)]}
    assert journal(engine, models, ids["complete"])[0].attachment == {"rows": [1, 2.5], "text": "é"}
    assert "the disk is full" in journal(engine, models, ids["raise"])[0].note
    # ctx.session work commits with the outcome, exactly once; the exception's work is rolled back
    assert sorted(r.note for r in side_rows(engine, side)) == ["complete", "die", "pause", "retry"]


def test_pause_with_carry_then_a_failure_then_completion(stack: Stack, app_engine: Any, engine: sa.Engine,
                                                         models: Any, prefix: str) -> None:
    side = side_table(engine, prefix)

    def act(self: Task, ctx: JobContext, session: Session | None) -> Any:
        assert session is not None
        side_write(session, side, ctx.job_id, ctx.run_count, f"step {(ctx.carry or {'step': 0})['step']}")
        step = (ctx.carry or {"step": 0})["step"] + 1
        ctx.carry = {"step": step}
        if step < 3:
            return Pause(note=f"step {step}")
        if ctx.failure_count == 0:
            raise ConnectionError("flaky")  # its session work is rolled back
        return Complete("all steps")

    Stepper = type("Stepper", (Task,), {"KIND": "stepper", "Carry": Step, "run": handler(stack, act),
                                        "backoff": classmethod(lambda cls, n: timedelta(0))})
    queue = Queue(models, [Stepper])
    [job_id] = enqueue(engine, queue, Stepper())
    drain(queue, app_engine)
    assert [(e.run_no, e.outcome) for e in journal(engine, models, job_id)] == [
        (1, "paused"), (2, "paused"), (3, "retried"), (4, "completed")]
    assert [(r.run_no, r.note) for r in side_rows(engine, side)] == [(1, "step 0"), (2, "step 1"), (4, "step 2")]
    assert job_row(engine, models, job_id).carry == {"step": 3}


def test_the_backstop_makes_a_job_dead(stack: Stack, app_engine: Any, engine: sa.Engine, models: Any,
                                       prefix: str) -> None:
    T = scripted(stack, side_table(engine, prefix))
    queue = Queue(models, [T])
    with Session(engine) as session, session.begin():
        JobFactory, _ = factories_for(models, session)
        job_id = JobFactory(kind="scripted", payload={"action": "raise"}, failure_count=2, run_count=2).id
    drain(queue, app_engine)
    row = job_row(engine, models, job_id)
    assert (row.status, row.failure_count, row.run_count) == ("dead", 3, 3)
    assert [e.outcome for e in journal(engine, models, job_id)] == ["dead"]


def test_a_zombie_outcome_is_discarded_with_its_session_work(stack: Stack, app_engine: Any, engine: sa.Engine,
                                                             models: Any, prefix: str,
                                                             caplog: pytest.LogCaptureFixture) -> None:
    side = side_table(engine, prefix)

    def act(self: Task, ctx: JobContext, session: Session | None) -> Complete:
        assert session is not None
        side_write(session, side, ctx.job_id, ctx.run_count, "late")
        session.flush()
        steal(engine, models, ctx.job_id, "zombie")  # the lease is lost meanwhile
        return Complete("too late")

    Zombie = type("Zombie", (Task,), {"KIND": "zombie", "run": handler(stack, act)})
    queue = Queue(models, [Zombie])
    [job_id] = enqueue(engine, queue, Zombie())
    with caplog.at_level(logging.WARNING, logger="venturi_sa"):
        drain(queue, app_engine, concurrency=1)
    row = job_row(engine, models, job_id)
    assert (row.status, row.claimed_by, row.run_count) == ("claimed", "thief:1", 2)
    assert [e.outcome for e in journal(engine, models, job_id)] == ["stale-recovered"]
    assert side_rows(engine, side) == []
    assert any("lease lost" in r.getMessage() for r in caplog.records)


def test_an_expired_lease_is_recovered_and_run_again(stack: Stack, app_engine: Any, engine: sa.Engine,
                                                     models: Any) -> None:
    runs: list[int] = []
    Again = type("Again", (Task,), {"KIND": "again", "run": handler(
        stack, lambda self, ctx, _: runs.append(ctx.run_count), session=False)})
    queue = Queue(models, [Again])
    with Session(engine) as session, session.begin():
        JobFactory, _ = factories_for(models, session)
        job_id = JobFactory(expired=True, kind="again").id
    events = Events()
    with running(Worker(queue, app_engine, poll_interval=0.2, recover_interval=0.1, on_event=events)):
        events.wait_for("finished", job_id=job_id)
    assert [e.outcome for e in journal(engine, models, job_id)] == ["stale-recovered", "completed"]
    assert runs == [2]


def test_a_held_lease_is_renewed(stack: Stack, app_engine: Any, engine: sa.Engine, models: Any) -> None:
    started, release = threading.Event(), threading.Event()

    def act(self: Task, ctx: JobContext, session: Session | None) -> None:
        started.set()
        release.wait(20)

    # 2 s, renewed every 0.67 s: a 1 s lease expired once when a loaded CI machine stalled the keeper 0.7 s
    Long = type("Long", (Task,), {"KIND": "long", "lease": timedelta(seconds=2),
                                  "run": handler(stack, act, session=False)})
    queue = Queue(models, [Long])
    [job_id] = enqueue(engine, queue, Long())
    events = Events()
    with running(Worker(queue, app_engine, poll_interval=0.2, on_event=events)):
        assert started.wait(20)
        first = job_row(engine, models, job_id).claim_expires_at
        wait_until(lambda: job_row(engine, models, job_id).claim_expires_at > first, what="a renewal")
        release.set()
        events.wait_for("finished", job_id=job_id)
    assert [e.outcome for e in journal(engine, models, job_id)] == ["completed"]


def test_an_idle_worker_is_woken_by_notify(stack: Stack, app_engine: Any, engine: sa.Engine, models: Any,
                                           caplog: pytest.LogCaptureFixture) -> None:
    Ping = type("Ping", (Task,), {"KIND": "ping", "run": handler(stack, lambda *_: None, session=False)})
    queue = Queue(models, [Ping])
    events = Events()
    worker = Worker(queue, app_engine, poll_interval=30, on_event=events)
    with caplog.at_level(logging.DEBUG, logger="venturi_sa"), running(worker):
        events.wait_for("idle")
        assert worker.listener is not None and worker.listener.connected.wait(20)
        assert worker.listener.backend_pid is not None
        for _ in range(3):
            mark = events.mark()
            start = time.monotonic()
            [job_id] = enqueue(engine, queue, Ping())
            at, _ = events.wait_for("finished", after=mark, timeout=5, job_id=job_id)
            assert at - start < 10.0  # a NOTIFY, not the 30 s poll (a loaded CI machine took 2.3 s once)
            events.wait_for("idle", after=mark)
    assert not [r for r in caplog.records if "LISTEN" in r.getMessage()]  # no reconnect per job


def test_a_cancel_notify_reaches_a_running_handler_before_the_next_renewal(stack: Stack, app_engine: Any,
                                                                           engine: sa.Engine, models: Any) -> None:
    """The listener (thread or loop task) nudges the lease keeper on the cancel NOTIFY: it renews at once.

    The lease is so long that the next scheduled renewal (every lease / 3)
    comes far later than the handler waits for the cancel: only the nudge
    can deliver it in time.
    """
    started, heard = threading.Event(), []

    def act(self: Task, ctx: JobContext, session: Session | None) -> None:
        started.set()
        heard.append(ctx.wait_cancelled(WAIT))
        ctx.raise_if_cancelled()

    lease = timedelta(seconds=30 * WAIT)  # renewals every 10 * WAIT
    Hold = type("Hold", (Task,), {"KIND": "hold", "lease": lease, "run": handler(stack, act, session=False)})
    queue = Queue(models, [Hold])
    events = Events()
    worker = Worker(queue, app_engine, poll_interval=0.2, on_event=events)
    with running(worker):
        events.wait_for("idle")
        assert worker.listener is not None and worker.listener.connected.wait(WAIT)
        [job_id] = enqueue(engine, queue, Hold())
        assert started.wait(WAIT)
        assert queue.cancel(engine, job_id, "stop now").result == "requested"
        events.wait_for("finished", job_id=job_id, timeout=2 * WAIT)  # the handler waits WAIT at most
        wait_until(lambda: heard, what="the handler's wait to end")
    assert heard == [True]  # delivered within WAIT, a tenth of one renewal interval
    assert [(e.outcome, e.note) for e in journal(engine, models, job_id)] == [
        ("dead", "cancelled by operator while running: stop now")]


def test_a_database_not_reachable_at_start_is_waited_for(stack: Stack, pg_url: str, models: Any,
                                                         caplog: pytest.LogCaptureFixture) -> None:
    nowhere = Engines(sa.make_url(pg_url).set(host="127.0.0.1", port=1).render_as_string(hide_password=False))
    try:
        with caplog.at_level(logging.ERROR, logger="venturi_sa"), running(Worker(Queue(models), nowhere.of(stack))):
            wait_until(lambda: [r for r in caplog.records if "cannot reach the database" in r.getMessage()],
                       what="the outage line")  # a transient error, whatever the driver raised
    finally:
        nowhere.dispose()


@pytest.mark.parametrize("unsupported", UNSUPPORTED, ids=lambda s: s.id)
def test_a_stack_no_driver_offers_is_refused_when_built(unsupported: Stack, pg_url: str) -> None:
    url = driver_url(pg_url, unsupported.driver)
    if refused_without_async_api(unsupported, url):
        return
    sync_on_asyncpg = sa.create_engine(url)  # asyncpg has no sync API: the Worker refuses it
    with pytest.raises(TypeError, match=r"sync Engine on the async driver 'asyncpg'.*create_async_engine"):
        Worker(Queue(make_models("refused")), sync_on_asyncpg)
