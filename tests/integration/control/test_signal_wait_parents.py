"""A dependent that ran and now waits for a signal with no timeout is not taken for one waiting on parents.

Both states are ``pending`` at ``visible_at = 'infinity'``.  Regression test:
requeueing the dependent's dead parent re-armed it (``waiting_on_parents``,
its count back above zero), and the parent's next outcome released it, so
it ran again without its signal.
"""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa
from marshmallow import Schema, fields
from sqlalchemy.orm import Session
from support.hooks import drain
from support.workers import job_row

from venturi_sa import Die, JobContext, Queue, Task
from venturi_sa.web import queries

runs: list[tuple[str, int]] = []


@pytest.fixture(autouse=True)
def _reset() -> None:
    runs.clear()


class Parent(Task):
    KIND = "parent"

    def run(self, ctx: JobContext) -> Any:
        runs.append(("parent", ctx.run_count))
        return Die("first run fails") if ctx.run_count == 1 else "done"


class Approval(Schema):
    order = fields.Integer(required=True)


class Child(Task):
    KIND = "child"
    Payload = Approval

    def run(self, ctx: JobContext) -> Any:
        runs.append(("child", ctx.run_count))
        return ctx.wait_for("approved")  # no timeout: 'infinity', as a job waiting on parents


def _state(engine: sa.Engine, queue: Queue, job_id: str) -> tuple[str, int, int]:
    """(explain's first code, stats' waiting on parents, stats' waiting for a signal)."""
    stats = queue.stats(engine)
    return queue.explain(engine, job_id).codes[0], stats.waiting, stats.waiting_for_signal


def test_requeueing_a_dead_parent_leaves_a_dependent_waiting_for_its_signal(engine: sa.Engine, models: Any) -> None:
    queue = Queue(models, [Parent, Child])
    with Session(engine) as session, session.begin():
        parent = queue.enqueue(session, Parent())
        child_id = queue.enqueue(session, Child(order=7), after=[parent], if_parent_dead="run").id
        parent_id = parent.id
    assert _state(engine, queue, child_id) == ("waiting_on_parents", 1, 0)
    drain(queue, engine)  # the parent dies; the child is released, runs, and waits for its signal
    assert runs == [("parent", 1), ("child", 1)]
    row = job_row(engine, models, child_id)
    assert (row.status, row.visible_at.year) == ("pending", 9999)  # the same marker as waiting on parents
    assert _state(engine, queue, child_id) == ("waiting_for_signal", 0, 1)

    queue.requeue(engine, parent_id)
    assert _state(engine, queue, child_id) == ("waiting_for_signal", 0, 1)  # not re-armed
    assert "signal" in queries.detail(models, engine, child_id).reason  # the dashboard's job page
    drain(queue, engine)  # the parent completes now: it releases nothing
    assert runs == [("parent", 1), ("child", 1), ("parent", 2)]  # the child did not run without its signal
    assert job_row(engine, models, child_id).visible_at.year == 9999
    assert _state(engine, queue, child_id) == ("waiting_for_signal", 0, 1)

    assert queue.signal(engine, child_id, "approved", {"by": "ann"}).result == "woke"
    drain(queue, engine)
    assert runs[-1] == ("child", 2)
    assert queue.result(engine, child_id) == {"by": "ann"}


def test_the_dashboard_tells_a_dependent_waiting_on_parents(engine: sa.Engine, models: Any) -> None:
    queue = Queue(models, [Parent, Child])
    with Session(engine) as session, session.begin():
        parent = queue.enqueue(session, Parent())
        child_id = queue.enqueue(session, Child(order=1), after=[parent]).id
    assert queries.detail(models, engine, child_id).reason == "waiting for its parents (listed below) to end"


def test_the_dashboard_does_not_call_a_signal_wait_a_wait_on_parents(engine: sa.Engine, models: Any) -> None:
    queue = Queue(models, [Child])
    with Session(engine) as session, session.begin():
        child_id = queue.enqueue(session, Child(order=2)).id
    drain(queue, engine)
    assert job_row(engine, models, child_id).visible_at.year == 9999
    reason = queries.detail(models, engine, child_id).reason
    assert "signal" in reason and "parents" not in reason
