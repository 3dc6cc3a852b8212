"""Pause and resume by kind (and the whole queue): claims skip paused kinds; persisted, with reason and end."""

from __future__ import annotations

import threading
from datetime import datetime, timedelta, timezone
from typing import Any

import control_app
import pytest
import sqlalchemy as sa
from control_kit import side
from marshmallow import Schema, fields
from queue_kit import drain, running, wait_until
from worker_kit import WAIT, Events, enqueue, job_row

from venturi_sa import JobContext, Queue, Task, Worker
from venturi_sa.errors import InvalidOption, InvalidTransition

pytestmark = pytest.mark.timeout(60)


class WaitPayload(Schema):
    wait = fields.Boolean(load_default=False)


def make_queue(models: Any, gate: threading.Event | None = None) -> Queue:
    class A(Task):
        KIND = "a"
        Payload = WaitPayload

        def run(self, ctx: JobContext) -> None:
            if gate is not None and self.payload.get("wait"):
                assert gate.wait(WAIT)

    class B(Task):
        KIND = "b"

        def run(self, ctx: JobContext) -> None:
            pass

    return Queue(models, [A, B])


def statuses(engine: sa.Engine, models: Any, ids: list[str]) -> list[str]:
    return [job_row(engine, models, j).status for j in ids]


def pause_rows(engine: sa.Engine, models: Any) -> list[sa.Row[Any]]:
    with engine.connect() as conn:
        return list(conn.execute(sa.select(models.pauses_table).order_by(models.pauses_table.c.id)))


def test_a_paused_kind_is_left_out_of_the_claim_until_resumed(engine: sa.Engine, models: Any) -> None:
    queue = make_queue(models)
    info = queue.pause(engine, "a", reason="vendor outage", actor="ops")
    assert (info.kind, info.reason, info.actor, info.resume_at) == ("a", "vendor outage", "ops", None)
    ids = enqueue(engine, queue, queue.registry.get("a")(), queue.registry.get("b")())
    assert drain(queue, engine) == 1
    assert statuses(engine, models, ids) == ["pending", "completed"]
    assert [p.kind for p in queue.pauses(engine)] == ["a"]
    resumed = queue.resume(engine, "a", actor="ops2")
    assert resumed.resumed_by == "ops2" and resumed.resumed_at is not None
    assert drain(queue, engine) == 1
    assert statuses(engine, models, ids) == ["completed", "completed"]
    assert queue.pauses(engine) == []
    [row] = pause_rows(engine, models)  # the record stays
    assert (row.kind, row.actor, row.reason, row.resumed_by) == ("a", "ops", "vendor outage", "ops2")
    with pytest.raises(InvalidTransition, match="not paused"):
        queue.resume(engine, "a")


def test_pausing_the_whole_queue_and_pausing_again_replaces_the_pause(engine: sa.Engine, models: Any) -> None:
    queue = make_queue(models)
    queue.pause(engine, "*", reason="migration")
    ids = enqueue(engine, queue, queue.registry.get("a")(), queue.registry.get("b")())
    assert drain(queue, engine) == 0
    queue.pause(engine, "*", reason="longer migration")
    assert [p.reason for p in queue.pauses(engine)] == ["longer migration"]
    assert [r.resumed_at is not None for r in pause_rows(engine, models)] == [True, False]
    queue.resume(engine, "*")
    assert drain(queue, engine) == 2
    assert statuses(engine, models, ids) == ["completed", "completed"]


def test_a_pause_with_an_end_resumes_by_itself(engine: sa.Engine, models: Any) -> None:
    """A running worker claims the job once ``until`` passes (polling; no resume call)."""
    queue = make_queue(models)
    info = queue.pause(engine, "a", reason="short", delay=timedelta(seconds=1))
    assert info.resume_at is not None
    [job_id] = enqueue(engine, queue, queue.registry.get("a")())
    assert drain(queue, engine) == 0
    events = Events()
    with running(Worker(queue, engine, poll_interval=0.2, on_event=events)):
        at, _ = events.wait_for("finished", job_id=job_id)
    assert job_row(engine, models, job_id).finished_at >= info.resume_at
    assert queue.pauses(engine) == []


def test_in_flight_runs_finish_when_their_kind_is_paused(engine: sa.Engine, models: Any) -> None:
    gate = threading.Event()
    queue = make_queue(models, gate)
    events = Events()
    with running(Worker(queue, engine, concurrency=2, poll_interval=0.2, on_event=events)):
        [first] = enqueue(engine, queue, queue.registry.get("a")(wait=True))
        events.wait_for("claimed", job_id=first)
        queue.pause(engine, "a", reason="drain")
        [second, other] = enqueue(engine, queue, queue.registry.get("a")(), queue.registry.get("b")())
        events.wait_for("finished", job_id=other)  # a claim round ran after the pause
        gate.set()
        events.wait_for("finished", job_id=first)
        assert job_row(engine, models, second).status == "pending"


def test_pause_input_is_checked_before_anything_is_written(engine: sa.Engine, models: Any) -> None:
    queue = make_queue(models)
    naive = datetime(2030, 1, 1)
    with pytest.raises(InvalidOption, match="timezone-aware"):
        queue.pause(engine, "a", until=naive)
    with pytest.raises(InvalidOption, match="not in the future"):
        queue.pause(engine, "a", until=datetime(2000, 1, 1, tzinfo=timezone.utc))
    with pytest.raises(InvalidOption, match="kind must be non-empty"):
        queue.pause(engine, "", reason="x")
    with pytest.raises(InvalidOption, match="not both"):
        queue.pause(engine, "a", until=datetime(2030, 1, 1, tzinfo=timezone.utc), delay=timedelta(1))
    assert pause_rows(engine, models) == []


def test_a_pause_holds_across_worker_process_restarts(engine: sa.Engine, models: Any, prefix: str,
                                                      procs: Any) -> None:
    """Each worker process runs a claim round (it completes a ``mark`` job) yet leaves ``hold`` alone."""
    queue = control_app.build_queue(prefix, engine)
    queue.pause(engine, "hold", reason="bad deploy", actor="ops")
    [held] = enqueue(engine, queue, queue.registry.get("hold")())
    for _ in range(2):
        proc = procs.start()
        [marker] = enqueue(engine, queue, queue.registry.get("mark")())
        wait_for_rows(engine, prefix, marker)
        assert procs.stop(proc) == 0
        assert job_row(engine, models, held).status == "pending"
    assert side(engine, prefix, "started") == []
    queue.resume(engine, "hold")
    proc = procs.start()
    wait_for_rows(engine, prefix, held, table="started")
    queue.cancel(engine, held)
    procs.stop(proc)


def wait_for_rows(engine: sa.Engine, prefix: str, job_id: str, table: str = "side") -> None:
    wait_until(lambda: side(engine, prefix, table, job_id), what=f"a {table} row of {job_id}")
