"""``Task.on_dead`` / ``on_complete`` / ``on_retry`` run in the transaction that records the outcome."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from marshmallow import Schema, fields
from sqlalchemy.orm import Session
from support.hooks import drain, exports_table, states
from support.waiting import WAIT, Events
from support.workers import enqueue, journal, running

from venturi_sa import Die, JobContext, Queue, Retry, Task, Worker
from venturi_sa.worker.outcome_hooks import OutcomeContext


class Ref(Schema):
    export_id = fields.Integer(required=True)


def make_tasks(table: sa.Table) -> dict[str, type[Task]]:
    def mark(ctx: OutcomeContext, export_id: int, state: str) -> None:
        ctx.session.execute(sa.update(table).where(table.c.id == export_id).values(state=state))

    class Export(Task):
        KIND = "export"
        Payload = Ref
        max_failures = 2

        @classmethod
        def backoff(cls, failure_count: int) -> timedelta:
            return timedelta(0)

        def run(self, ctx: JobContext) -> Any:
            if self.payload["export_id"] == 2:
                raise RuntimeError("disk full")
            if self.payload["export_id"] == 3:
                return Die("customer deleted")
            return {"rows": 10}

        def on_complete(self, ctx: OutcomeContext, result: Any) -> None:
            mark(ctx, self.payload["export_id"], f"done: {result['rows']} rows")

        def on_retry(self, ctx: OutcomeContext, note: str | None) -> None:
            mark(ctx, self.payload["export_id"], f"retrying after failure {ctx.failure_count}")

        def on_dead(self, ctx: OutcomeContext, note: str | None) -> None:
            mark(ctx, self.payload["export_id"], f"failed: {note}")

    class Broken(Task):
        KIND = "broken"
        Payload = Ref
        max_failures = 1

        def run(self, ctx: JobContext) -> Any:
            ctx.session.execute(sa.update(table).where(table.c.id == self.payload["export_id"]).values(
                state="written by the handler"))
            return None

        def on_complete(self, ctx: OutcomeContext, result: Any) -> None:
            raise ValueError("hook bug")

    return {"export": Export, "broken": Broken}


@pytest.fixture
def exports(engine: sa.Engine, prefix: str) -> sa.Table:
    table = exports_table(engine, prefix)
    with engine.begin() as conn:
        conn.execute(sa.insert(table), [{"id": n, "state": "in progress"} for n in (1, 2, 3, 4)])
    return table


@pytest.mark.parametrize("batch_outcomes", [True, False])
def test_the_apps_row_flips_with_the_final_state(engine: sa.Engine, models: Any, exports: sa.Table,
                                                 batch_outcomes: bool) -> None:
    tasks = make_tasks(exports)
    queue = Queue(models, tasks.values())
    done, failing, dying = enqueue(engine, queue, *(tasks["export"](export_id=n) for n in (1, 2, 3)))
    drain(queue, engine, batch_outcomes=batch_outcomes)
    assert states(engine, exports) == {
        1: "done: 10 rows",
        2: "failed: RuntimeError: disk full (failure 2 of max_failures 2)",
        3: "failed: customer deleted",
        4: "in progress",
    }
    assert [e.outcome for e in journal(engine, models, failing)] == ["retried", "dead"]
    assert queue.result(engine, done) == {"rows": 10}


def test_a_raising_hook_rolls_back_everything_and_records_a_failure(engine: sa.Engine, models: Any,
                                                                   exports: sa.Table) -> None:
    tasks = make_tasks(exports)
    queue = Queue(models, tasks.values())
    [job_id] = enqueue(engine, queue, tasks["broken"](export_id=4))
    drain(queue, engine)
    assert states(engine, exports)[4] == "in progress"  # neither the handler's nor the hook's write
    [entry] = journal(engine, models, job_id)
    assert entry.outcome == "dead"
    assert "Broken.on_complete raised ValueError: hook bug" in entry.note


def test_a_lost_fence_calls_no_hook_and_commits_nothing(engine: sa.Engine, models: Any, exports: sa.Table) -> None:
    gate = threading.Event()
    table = exports

    class Late(Task):
        KIND = "late"

        def run(self, ctx: JobContext) -> Any:
            if ctx.run_count == 1:
                gate.wait(WAIT)  # meanwhile an operator released the job
                return Retry("late")
            return Die("second run")

        def on_retry(self, ctx: OutcomeContext, note: str | None) -> None:
            ctx.session.execute(sa.update(table).where(table.c.id == 1).values(state="zombie wrote this"))

        def on_dead(self, ctx: OutcomeContext, note: str | None) -> None:
            ctx.session.execute(sa.update(table).where(table.c.id == 2).values(state=f"dead: {note}"))

    queue = Queue(models, [Late])
    [job_id] = enqueue(engine, queue, Late())
    events = Events()
    with running(Worker(queue, engine, concurrency=1, poll_interval=0.1, on_event=events)):
        events.wait_for("claimed", job_id=job_id)
        queue.release(engine, job_id)
        gate.set()
        events.wait_count("finished", 2)
    assert states(engine, exports)[1] == "in progress"
    assert states(engine, exports)[2] == "dead: second run"
    assert [e.outcome for e in journal(engine, models, job_id)] == ["released", "dead"]


def test_the_testing_drain_runs_the_hooks_in_the_tests_transaction(engine: sa.Engine, models: Any,
                                                                   exports: sa.Table) -> None:
    from venturi_sa.testing import drain as test_drain

    tasks = make_tasks(exports)
    queue = Queue(models, tasks.values())
    with Session(engine) as session:
        queue.enqueue(session, tasks["export"](export_id=3))
        assert test_drain(session, queue).dead == 1
        state = session.execute(sa.select(exports.c.state).where(exports.c.id == 3)).scalar_one()
        assert state == "failed: customer deleted"
        session.rollback()
    assert states(engine, exports)[3] == "in progress"
