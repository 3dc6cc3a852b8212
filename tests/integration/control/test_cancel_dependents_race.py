"""``cancel(J, with_dependents=True)`` racing J's completion: no deadlock, and never "cancel failed, dependents ran"."""

from __future__ import annotations

import threading
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.orm import Session
from support.control import watched
from support.waiting import WAIT, wait_until
from support.workers import enqueue

from venturi_sa import JobContext, Queue, Task

pytestmark = pytest.mark.timeout(120)

DEPENDENTS = 300
ROUNDS = 3


class Child(Task):
    KIND = "child"  # no worker runs it: a released child stays pending, so the end state is readable

    def run(self, ctx: JobContext) -> None:
        pass


def _statuses(engine: sa.Engine, models: Any, ids: list[str]) -> dict[str, int]:
    job = models.Job
    with engine.connect() as conn:
        rows = conn.execute(sa.select(job.status, sa.func.count()).where(job.id.in_(ids)).group_by(job.status))
        return {r[0]: int(r[1]) for r in rows}


def _children(engine: sa.Engine, queue: Queue, parent: str) -> list[str]:
    with Session(engine) as s, s.begin():
        return queue.enqueue_many(s, [Child() for _ in range(DEPENDENTS)], after=[parent], ids_only=True)


def test_a_cancel_with_dependents_racing_the_parent_s_completion_never_deadlocks(engine: sa.Engine,
                                                                                models: Any) -> None:
    go = threading.Event()
    started = threading.Semaphore(0)

    class Parent(Task):
        KIND = "parent"

        def run(self, ctx: JobContext) -> None:
            started.release()
            go.wait(WAIT)

    queue = Queue(models, [Parent, Child])
    canceller: dict[int, int] = {}
    midway = threading.Event()

    @sa.event.listens_for(engine, "before_cursor_execute")
    def count(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if threading.get_ident() in canceller:
            canceller[threading.get_ident()] += 1
            if canceller[threading.get_ident()] >= 40:  # several dependents are cancelled, the rest not yet
                midway.set()

    try:
        with watched(queue, engine, kinds=["parent"], poll_interval=0.05) as events:
            for _ in range(ROUNDS):
                go.clear()
                midway.clear()
                [parent] = enqueue(engine, queue, Parent())
                children = _children(engine, queue, parent)
                assert started.acquire(timeout=WAIT)
                results: list[Any] = []

                thread = threading.Thread(target=_cancel, args=(queue, engine, parent, results, canceller))
                thread.start()
                assert midway.wait(WAIT)
                go.set()  # the parent completes while the cancel is under way
                thread.join(WAIT)
                assert not thread.is_alive()
                [result] = results
                assert not isinstance(result, Exception), f"the cancel failed: {result!r}"
                events.wait_for("finished", job_id=parent, recorded=True)
                # Whichever committed first, no dependent was left to run.
                assert _statuses(engine, models, children) == {"dead": DEPENDENTS}
    finally:
        sa.event.remove(engine, "before_cursor_execute", count)


def _cancel(queue: Queue, engine: sa.Engine, parent: str, results: list[Any], canceller: dict[int, int]) -> None:
    canceller[threading.get_ident()] = 0  # its statements are counted
    try:
        results.append(queue.cancel(engine, parent, "stop the workflow", with_dependents=True))
    except Exception as exc:  # noqa: BLE001 - asserted by the test
        results.append(exc)


def test_a_cancel_with_dependents_after_the_parent_completed_cancels_the_released_dependents(
        engine: sa.Engine, models: Any) -> None:
    class Parent(Task):
        KIND = "parent"

        def run(self, ctx: JobContext) -> None:
            pass

    queue = Queue(models, [Parent, Child])
    [parent] = enqueue(engine, queue, Parent())
    children = _children(engine, queue, parent)
    with watched(queue, engine, kinds=["parent"], poll_interval=0.05) as events:
        events.wait_for("finished", job_id=parent, recorded=True)
    wait_until(lambda: _statuses(engine, models, children) == {"pending": DEPENDENTS}, what="released children")
    done = queue.cancel(engine, parent, with_dependents=True)
    assert (done.status, done.result) == ("completed", "ended")
    assert _statuses(engine, models, children) == {"dead": DEPENDENTS}


def _cancel_in_session(queue: Queue, engine: sa.Engine, parent: str, start: threading.Barrier,
                       results: list[Any]) -> None:
    start.wait(WAIT)
    try:
        with Session(engine) as s, s.begin():
            results.append(queue.cancel(s, parent, with_dependents=True).result)
    except Exception as exc:  # noqa: BLE001 - asserted by the test
        results.append(type(exc).__name__)


def test_two_cancels_with_dependents_of_one_pending_job_at_once_never_deadlock(engine: sa.Engine,
                                                                               models: Any) -> None:
    """In the callers' own sessions (no retry): one cancels the workflow, the other finds it already dead."""
    class Parent(Task):
        KIND = "parent"

        def run(self, ctx: JobContext) -> None:
            pass

    queue = Queue(models, [Parent, Child])
    for _ in range(ROUNDS):
        [parent] = enqueue(engine, queue, Parent())
        children = _children(engine, queue, parent)
        start = threading.Barrier(2)
        results: list[Any] = []
        threads = [threading.Thread(target=_cancel_in_session, args=(queue, engine, parent, start, results))
                   for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(WAIT)
        assert sorted(results) == ["InvalidTransition", "cancelled"]
        assert _statuses(engine, models, children) == {"dead": DEPENDENTS}
