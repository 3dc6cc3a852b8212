"""Pause and resume by kind (and the whole queue): claims skip paused kinds; persisted, with reason and end."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from threading import Event
from typing import Any

import control_app
import pytest
import sqlalchemy as sa
from marshmallow import Schema, fields
from support.control import noop_tasks, side, watched
from support.queues import drain
from support.waiting import WAIT, wait_until
from support.workers import enqueue, job_row

from venturi_sa import JobContext, Queue, Task
from venturi_sa.errors import InvalidOption, InvalidTransition
from venturi_sa.storage.claim import explain_claim
from venturi_sa.storage.params import ClaimParams

pytestmark = pytest.mark.timeout(60)


class WaitPayload(Schema):
    wait = fields.Boolean(load_default=False)


def make_queue(models: Any, gate: Event | None = None) -> Queue:
    class A(Task):
        KIND = "a"
        Payload = WaitPayload

        def run(self, ctx: JobContext) -> None:
            if gate is not None and self.payload.get("wait"):
                assert gate.wait(WAIT)

    return Queue(models, [A, *noop_tasks("b")])


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
    info = queue.pause(engine, "a", reason="short", delay=timedelta(seconds=3))  # outlasts a loaded drain
    assert info.resume_at is not None
    [job_id] = enqueue(engine, queue, queue.registry.get("a")())
    assert drain(queue, engine) == 0
    with watched(queue, engine) as events:
        events.wait_for("finished", job_id=job_id)
    assert job_row(engine, models, job_id).finished_at >= info.resume_at
    assert queue.pauses(engine) == []


def test_in_flight_runs_finish_when_their_kind_is_paused(engine: sa.Engine, models: Any, gate: Event) -> None:
    queue = make_queue(models, gate)
    with watched(queue, engine, concurrency=2) as events:
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


KINDS = ("reports.daily", "reports.weekly", "reportsx", "rep_rt.a", "repXrt.a", "mail")


def test_a_kind_pattern_pauses_every_kind_it_starts_and_coexists_with_exact_pauses(
        engine: sa.Engine, models: Any) -> None:
    queue = Queue(models, noop_tasks(*KINDS))
    jobs = dict(zip(KINDS, enqueue(engine, queue, *(queue.registry.get(k)() for k in KINDS)), strict=True))
    queue.pause(engine, "reports.*", reason="bad report deploy", actor="ops")
    queue.pause(engine, "reports.daily", reason="its own reason", actor="ops")
    queue.pause(engine, "rep_rt*", reason="literal prefix")  # '_' is no wildcard: repXrt.a runs
    assert drain(queue, engine) == 3
    assert statuses(engine, models, list(jobs.values())) == ["pending", "pending", "completed", "pending",
                                                            "completed", "completed"]
    why = queue.explain(engine, jobs["reports.weekly"])
    assert why.codes[0] == "paused" and "kind 'reports.weekly' is paused by the pattern 'reports.*'" in str(why)
    assert "is paused by ops" in str(queue.explain(engine, jobs["reports.daily"]))  # its own pause first
    with pytest.raises(InvalidTransition, match="held by the pause of 'reports.[*]', resume that"):
        queue.resume(engine, "reports.weekly")
    queue.resume(engine, "reports.*")
    assert drain(queue, engine) == 1  # reports.weekly; reports.daily keeps its own pause
    assert statuses(engine, models, [jobs["reports.daily"], jobs["reports.weekly"]]) == ["pending", "completed"]
    queue.resume(engine, "reports.daily")
    queue.resume(engine, "rep_rt*")
    assert drain(queue, engine) == 2 and queue.pauses(engine) == []


def test_kind_patterns_are_checked_before_anything_is_written(engine: sa.Engine, models: Any) -> None:
    queue = Queue(models, noop_tasks("a"))
    for bad in ("a*b", "**", "reports.**", "*reports", "re*ports.*"):
        with pytest.raises(InvalidOption, match=f"kind pattern '{re.escape(bad)}': '[*]' may only end it"):
            queue.pause(engine, bad, reason="x")
        with pytest.raises(InvalidOption, match="may only end it"):
            queue.resume(engine, bad)
    with pytest.raises(InvalidOption, match="neither a kind nor a kind pattern"):
        queue.pause(engine, "two words*", reason="x")
    assert pause_rows(engine, models) == []


def test_the_claim_reads_the_pauses_once_per_claim(engine: sa.Engine, models: Any) -> None:
    """``EXPLAIN ANALYZE``: the pause lookup (exact kinds and patterns) is an InitPlan run once, whatever the
    number of rows the claim scans, and the claim still walks the partial claim index."""
    jobs = models.jobs_table
    with engine.begin() as conn:
        conn.execute(sa.insert(jobs), [{"id": f"{n:026d}", "kind": f"k{n % 4}", "payload": {},
                                        "priority": n % 3} for n in range(20000)])
        conn.execute(sa.text(f"ANALYZE {jobs.name}"))
    queue = Queue(models)
    for kind in ("k1", "k*", "other.*", "xy"):
        queue.pause(engine, kind, reason="plan")
    queue.resume(engine, "k*")  # k1 stays paused by its own pause: the claim takes k2 jobs only
    params = ClaimParams(worker_id="explain:1", kinds=["k1", "k2"], limit=10, leases={},
                         default_lease=timedelta(seconds=60))
    with engine.connect() as conn:
        [plan] = json.loads(explain_claim(conn, models, params, analyze=True))
        conn.rollback()
    nodes = list(walk(plan["Plan"]))
    pause_scans = [(node, path) for node, path in nodes if node.get("Relation Name") == models.pauses_table.name]
    assert pause_scans, plan
    for _node, path in pause_scans:
        init = [n for n in path if n.get("Parent Relationship") == "InitPlan"]
        assert init and init[-1]["Actual Loops"] == 1, plan  # inside an InitPlan, evaluated once
        assert not [n for n in path if n.get("Parent Relationship") == "SubPlan"], plan  # never per row
    [update] = [n for n, _ in nodes if n.get("Operation") == "Update"]
    assert update["Actual Rows"] == 10, plan
    assert any(str(n.get("Index Name", "")).startswith(f"{jobs.name}_claim") for n, _ in nodes), plan


def walk(node: dict[str, Any], path: tuple[dict[str, Any], ...] = ()) -> Iterator[tuple[dict[str, Any],
                                                                                        tuple[dict[str, Any], ...]]]:
    """Every plan node with the nodes above it (itself last)."""
    here = (*path, node)
    yield node, here
    for child in node.get("Plans", ()):
        yield from walk(child, here)
