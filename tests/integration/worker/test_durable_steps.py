"""``ctx.step``: recorded once, fenced on the run's claim, replayed by name on later runs."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.orm import Session
from support.hooks import drain
from support.waiting import WAIT, Events
from support.workers import enqueue, job_row, journal, running

from venturi_sa import JobContext, Queue, Task, Worker, task
from venturi_sa.errors import InvalidOption, LeaseLost

calls: list[str] = []


@pytest.fixture(autouse=True)
def _reset() -> None:
    calls.clear()


class Order(Task):
    """charge -> ship -> email; fails after ship on its first run."""

    KIND = "order"

    @classmethod
    def backoff(cls, failure_count: int) -> timedelta:
        return timedelta(0)

    def run(self, ctx: JobContext) -> Any:
        charge = ctx.step("charge", lambda: calls.append("charge") or {"charge": ctx.step_key("charge")})
        ctx.step("ship", lambda: calls.append("ship"))
        if ctx.run_count == 1:
            raise RuntimeError("crashed after ship")
        ctx.step("email", lambda: calls.append("email") or "sent")
        return charge


def test_a_recorded_step_is_replayed_not_rerun(engine: sa.Engine, models: Any) -> None:
    queue = Queue(models, [Order])
    [job_id] = enqueue(engine, queue, Order())
    drain(queue, engine)
    assert calls == ["charge", "ship", "email"]  # charge and ship ran once across two runs
    assert queue.result(engine, job_id) == {"charge": f"{job_id}:charge"}
    steps = queue.steps(engine, job_id)
    assert [(s.name, s.entry, s.result, s.run_no) for s in steps] == [
        ("charge", "step", {"charge": f"{job_id}:charge"}, 1), ("ship", "step", None, 1),
        ("email", "step", "sent", 2)]
    assert all(s.finished_at is not None and s.finished_at >= s.started_at for s in steps)


def test_duplicate_names_raising_steps_and_unstorable_results(engine: sa.Engine, models: Any) -> None:
    seen: list[Any] = []

    class Odd(Task):
        KIND = "odd"
        max_failures = 1

        def run(self, ctx: JobContext) -> Any:
            ctx.step("a", lambda: 1)
            with pytest.raises(InvalidOption, match="used twice"):
                ctx.step("a", lambda: 2)
            with pytest.raises(ZeroDivisionError):
                ctx.step("boom", lambda: 1 / 0)
            seen.append(ctx.step("boom", lambda: "second try"))  # nothing was recorded: runs again
            ctx.step("bad", lambda: {1, 2})
            return None

    queue = Queue(models, [Odd])
    [job_id] = enqueue(engine, queue, Odd())
    drain(queue, engine)
    assert seen == ["second try"]
    assert job_row(engine, models, job_id).status == "dead"  # an unstorable result is the run's failure
    assert "InvalidPayload" in (journal(engine, models, job_id)[-1].note or "")
    assert [s.name for s in queue.steps(engine, job_id)] == ["a", "boom"]


def test_a_transactional_step_commits_its_writes_with_its_record(engine: sa.Engine, models: Any) -> None:
    table = sa.Table(f"{models.prefix}_ledger", sa.MetaData(), sa.Column("id", sa.Text, primary_key=True))
    table.create(engine)

    class Ledger(Task):
        KIND = "ledger"

        @classmethod
        def backoff(cls, failure_count: int) -> timedelta:
            return timedelta(0)

        def run(self, ctx: JobContext) -> Any:
            def write(session: Session) -> str:
                session.execute(table.insert().values(id=f"row-{ctx.run_count}"))
                if ctx.run_count == 1:
                    raise RuntimeError("rolled back with the step")
                return "written"

            return ctx.step("write", write, transactional=True)

    queue = Queue(models, [Ledger])
    [job_id] = enqueue(engine, queue, Ledger())
    drain(queue, engine)
    assert queue.result(engine, job_id) == "written"
    with engine.connect() as conn:
        assert [r.id for r in conn.execute(sa.select(table.c.id))] == ["row-2"]


def test_a_zombie_step_records_nothing(engine: sa.Engine, models: Any) -> None:
    released = threading.Event()
    raised: list[Any] = []

    class Slow(Task):
        KIND = "slow"

        def run(self, ctx: JobContext) -> Any:
            if ctx.run_count == 1:
                released.wait(WAIT)
                try:
                    ctx.step("effect", lambda: "zombie")
                except LeaseLost as exc:
                    raised.append(exc)
                    raise
            return ctx.step("effect", lambda: "live")

    queue = Queue(models, [Slow])
    [job_id] = enqueue(engine, queue, Slow())
    events = Events()
    with running(Worker(queue, engine, concurrency=1, poll_interval=0.1, on_event=events)):
        events.wait_for("claimed", job_id=job_id)
        queue.release(engine, job_id, note="operator")
        released.set()
        events.wait_for("finished", job_id=job_id, after=0)
        events.wait_count("finished", 2)
    assert len(raised) == 1
    assert queue.result(engine, job_id) == "live"
    assert [(s.name, s.result, s.run_no) for s in queue.steps(engine, job_id)] == [("effect", "live", 2)]


def test_task_functions_and_async_handlers_get_the_same_methods(engine: sa.Engine, models: Any) -> None:
    @task("fn_steps", backoff=lambda n: timedelta(0))
    async def fn_steps(payload: Any, ctx: JobContext) -> Any:
        async def charge() -> str:
            calls.append("charge")
            return "charged"

        first = await ctx.step_async("charge", charge)
        if ctx.run_count == 1:
            raise RuntimeError("retry")
        return first

    queue = Queue(models, [fn_steps])
    [job_id] = enqueue(engine, queue, fn_steps())
    drain(queue, engine)
    assert queue.result(engine, job_id) == "charged"
    assert calls == ["charge"]


def test_a_zombie_transactional_step_rolls_its_writes_back(engine: sa.Engine, models: Any) -> None:
    table = sa.Table(f"{models.prefix}_writes", sa.MetaData(), sa.Column("run", sa.Integer, primary_key=True))
    table.create(engine)
    released = threading.Event()
    raised: list[Any] = []

    class Slow(Task):
        KIND = "slow_tx"

        def run(self, ctx: JobContext) -> Any:
            def write(session: Session) -> int:
                if ctx.run_count == 1:
                    released.wait(WAIT)  # an operator releases the job meanwhile: this run is a zombie
                session.execute(table.insert().values(run=ctx.run_count))
                return ctx.run_count

            try:
                return ctx.step("write", write, transactional=True)
            except LeaseLost as exc:
                raised.append(exc)
                raise

    queue = Queue(models, [Slow])
    [job_id] = enqueue(engine, queue, Slow())
    events = Events()
    with running(Worker(queue, engine, concurrency=2, poll_interval=0.1, on_event=events)):
        events.wait_for("claimed", job_id=job_id)
        queue.release(engine, job_id, note="operator")
        events.wait_count("claimed", 2)
        released.set()
        events.wait_count("finished", 2)
    assert len(raised) == 1
    assert queue.result(engine, job_id) == 2
    with engine.connect() as conn:
        assert [r.run for r in conn.execute(sa.select(table.c.run))] == [2]  # the zombie's write rolled back
