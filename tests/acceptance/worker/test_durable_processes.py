"""Durable steps, sleeps and signals with real worker processes: kill -9, slots, wake-ups, timeouts."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa
import steps_app
from sqlalchemy.orm import Session
from support.processes import Procs, app_procs
from support.waiting import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]
POINTS = ("in:charge", "after:charge", "in:ship", "after:ship", "in:email", "after:email", "")


@pytest.fixture
def procs(pg_url: str, engine: sa.Engine, models: Any, prefix: str) -> Iterator[Procs]:
    yield from app_procs(steps_app, engine, pg_url, prefix)


def rows(engine: sa.Engine, sql: str, **params: Any) -> list[Any]:
    with engine.connect() as conn:
        return list(conn.execute(sa.text(sql), params))


def enqueue(engine: sa.Engine, prefix: str, kind: str, *payloads: dict[str, Any]) -> list[str]:
    queue = steps_app.build_queue(prefix, engine)
    task = queue.registry.get(kind)
    with Session(engine) as session, session.begin():
        return [job.id for job in queue.enqueue_many(session, [task(**p) for p in payloads])]


def status(engine: sa.Engine, prefix: str, job_id: str) -> str:
    return str(rows(engine, f"SELECT status FROM {prefix}_jobs WHERE id = :i", i=job_id)[0].status)


def test_a_recorded_step_never_runs_twice_across_kill_9(engine: sa.Engine, prefix: str, procs: Procs) -> None:
    ids = dict(zip(POINTS, enqueue(engine, prefix, "order", *({"kill": p} for p in POINTS)), strict=True))

    def done() -> bool:
        return all(status(engine, prefix, i) == "completed" for i in ids.values())

    killed = 0
    while not done():
        assert killed <= len(POINTS), "more processes died than there are kill points"
        proc = procs.start(concurrency=1, lease=2)
        wait_until(lambda proc=proc: proc.poll() is not None or done(), 120, "a kill or the end", every=0.1)
        if proc.poll() is None:
            assert procs.stop(proc) == 0
        else:
            killed += 1
    assert killed == len(POINTS) - 1  # every point but "" killed its process once
    queue = steps_app.build_queue(prefix, engine)
    for point, job_id in ids.items():
        effects = rows(engine, f"SELECT step, idempotency_key, run_no FROM {prefix}_effects WHERE job_id = :i "
                               "ORDER BY run_no, step", i=job_id)
        ran = [e.step for e in effects]
        twice = point.removeprefix("in:") if point.startswith("in:") else None
        for step in steps_app.STEPS:
            # a step whose record was written never runs again; one killed before its record runs once more
            assert ran.count(step) == (2 if step == twice else 1), (point, ran)
        assert all(e.idempotency_key == f"{job_id}:{e.step}" for e in effects)
        recorded = queue.steps(engine, job_id)
        assert [(s.name, s.result) for s in recorded] == [(s, f"{s} done") for s in steps_app.STEPS], point
        assert queue.result(engine, job_id) == "delivered"


def test_a_sleeping_job_frees_its_slot_and_resumes_after_its_delay(engine: sa.Engine, prefix: str,
                                                                    procs: Procs) -> None:
    [nap] = enqueue(engine, prefix, "nap", {"seconds": 2.0})
    proc = procs.start(concurrency=1)
    wait_until(lambda: rows(engine, f"SELECT count(*) AS n FROM {prefix}_journal WHERE job_id = :i", i=nap)[0].n,
               60, "the nap to suspend", every=0.05)
    quick = enqueue(engine, prefix, "quick", {}, {}, {})  # the one slot is free while the nap sleeps
    wait_until(lambda: status(engine, prefix, nap) == "completed", 60, "the nap to end", every=0.05)
    assert procs.stop(proc) == 0
    [sleep] = rows(engine, f"SELECT wake_at, started_at FROM {prefix}_steps WHERE job_id = :i", i=nap)
    finished = [rows(engine, f"SELECT finished_at FROM {prefix}_jobs WHERE id = :i", i=q)[0].finished_at
                for q in quick]
    assert all(f < sleep.wake_at for f in finished)  # the quick jobs ran during the sleep, in its slot
    journal = rows(engine, f"SELECT run_no, outcome, recorded_at FROM {prefix}_journal WHERE job_id = :i "
                           "ORDER BY id", i=nap)
    assert [(j.run_no, j.outcome) for j in journal] == [(1, "paused"), (2, "completed")]
    assert journal[1].recorded_at >= sleep.wake_at  # resumed after its delay
    [job] = rows(engine, f"SELECT run_count, failure_count FROM {prefix}_jobs WHERE id = :i", i=nap)
    assert (job.run_count, job.failure_count) == (2, 0)


def test_signals_wake_waits_promptly_and_waits_time_out(engine: sa.Engine, prefix: str, procs: Procs) -> None:
    queue = steps_app.build_queue(prefix, engine)
    [approval, short] = enqueue(engine, prefix, "approval", {"seconds": 600.0}, {"seconds": 1.0})
    proc = procs.start(concurrency=2)
    wait_until(lambda: rows(engine, f"SELECT count(*) AS n FROM {prefix}_journal WHERE job_id = :i",
                            i=approval)[0].n == 1, 60, "the wait to suspend", every=0.05)
    with Session(engine) as session:
        assert queue.signal(session, approval, "approved", {"by": "nobody"}).result == "woke"
        session.rollback()  # never delivered: no run, no stored signal
    with Session(engine) as session, session.begin():
        assert queue.signal(session, approval, "approved", {"by": "ann"}).result == "woke"
    sent = time.monotonic()
    wait_until(lambda: status(engine, prefix, approval) == "completed", 30, "the woken job", every=0.02)
    assert time.monotonic() - sent < 1.0
    assert queue.result(engine, approval) == {"by": "ann"}
    assert [s.payload for s in queue.signals(engine, approval)] == [{"by": "ann"}]
    assert queue.get_job(engine, approval).run_count == 2  # the rolled-back signal woke nothing
    wait_until(lambda: status(engine, prefix, short) == "completed", 60, "the timed-out wait", every=0.05)
    assert procs.stop(proc) == 0
    assert queue.result(engine, short) == "timed out"
    assert [s.resolution for s in queue.steps(engine, short)] == ["timeout"]
