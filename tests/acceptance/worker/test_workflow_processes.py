"""Dependent jobs across real worker processes: chains in order, fan-ins exactly once (a worker SIGKILLed
mid-way included), both dead-parent policies, rollback, and the waiting reason."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa
import workflow_app
from sqlalchemy.orm import Session
from support.processes import PROCESS_WAIT, Procs, app_procs
from support.waiting import wait_until

from venturi_sa import Queue

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]


@pytest.fixture
def procs(pg_url: str, engine: sa.Engine, models: Any, prefix: str) -> Iterator[Procs]:
    yield from app_procs(workflow_app, engine, pg_url, prefix)


@pytest.fixture
def queue(engine: sa.Engine, prefix: str, models: Any) -> Queue:
    return workflow_app.build_queue(prefix, engine)


def rows(engine: sa.Engine, sql: str, **params: Any) -> list[Any]:
    with engine.connect() as conn:
        return list(conn.execute(sa.text(sql), params))


def scalar(engine: sa.Engine, sql: str, **params: Any) -> Any:
    with engine.connect() as conn:
        return conn.execute(sa.text(sql), params).scalar()


def wait_for(engine: sa.Engine, sql: str, expected: Any, **params: Any) -> None:
    wait_until(lambda: scalar(engine, sql, **params) == expected, PROCESS_WAIT, f"{sql!r} to be {expected!r}",
               every=0.1)


def step(queue: Queue, n: int, mode: str = "ok") -> Any:
    return queue.registry.get("step")(n=n, mode=mode)


def test_a_chain_runs_in_order_across_processes(engine: sa.Engine, prefix: str, procs: Procs,
                                                queue: Queue) -> None:
    workers = [procs.start(concurrency=4) for _ in range(3)]
    with Session(engine) as s, s.begin():
        chain = [queue.enqueue(s, step(queue, 0))]
        for n in range(1, 8):
            chain.append(queue.enqueue(s, step(queue, n), after=[chain[-1]]))
        ids = [j.id for j in chain]
    wait_for(engine, f"SELECT count(*) FROM {prefix}_jobs WHERE status = 'completed'", 8)
    order = [r.job_id for r in rows(engine, f"SELECT job_id FROM {prefix}_side ORDER BY at")]
    assert order == ids  # each ran once, after its parent had committed
    assert [procs.stop(w) for w in workers] == [0, 0, 0]


def test_fan_ins_run_exactly_once_after_all_parents_even_with_a_worker_killed(
        engine: sa.Engine, prefix: str, procs: Procs, queue: Queue) -> None:
    """Ten fan-ins of 30 parents each over four processes (their last parents end concurrently on different
    workers), one parent's worker SIGKILLed mid-run: every callback runs once, after all its parents."""
    victim = procs.start(concurrency=2, lease=2)
    gather = queue.registry.get("gather")
    with Session(engine) as s, s.begin():
        blocked = queue.enqueue(s, step(queue, 1000, "block_once"))
        callbacks = []
        for group in range(10):
            parents = queue.enqueue_many(s, [step(queue, group * 100 + i) for i in range(30)])
            if group == 0:
                parents.append(blocked)
            callbacks.append(queue.enqueue(s, gather(), after=parents).id)
    wait_for(engine, f"SELECT count(*) FROM {prefix}_started", 1)
    why = queue.explain(engine, callbacks[0]).reasons[0]
    assert why.code == "waiting_on_parents" and " of 31 parents: " in why.text
    others = [procs.start(concurrency=8, lease=2) for _ in range(3)]
    victim.kill()
    assert victim.wait(10) == -signal.SIGKILL
    wait_for(engine, f"SELECT count(*) FROM {prefix}_gathered", 10)
    wait_for(engine, f"SELECT count(*) FROM {prefix}_jobs WHERE status <> 'completed'", 0)
    assert [procs.stop(w) for w in others] == [0, 0, 0]
    gathered = {r.job_id: r for r in rows(engine, f"SELECT * FROM {prefix}_gathered")}
    assert sorted(gathered) == sorted(callbacks)  # one row each: exactly once
    for group, callback in enumerate(callbacks):
        row = gathered[callback]
        size = 31 if group == 0 else 30
        total = sum(group * 100 + i for i in range(30)) + (1000 if group == 0 else 0)
        assert (row.parents, row.terminal, row.total) == (size, size, total)
    late = scalar(engine, f"""SELECT count(*) FROM {prefix}_gathered AS g JOIN {prefix}_parents AS p
                              ON p.job_id = g.job_id JOIN {prefix}_side AS s ON s.job_id = p.parent_id
                              WHERE s.at >= g.at""")
    assert late == 0  # no callback ran before one of its parents
    assert scalar(engine, f"SELECT count(*) FROM {prefix}_side") == 301
    assert scalar(engine, f"SELECT count(DISTINCT pid) FROM {prefix}_gathered") >= 1


def test_both_policies_and_rollback(engine: sa.Engine, prefix: str, procs: Procs, queue: Queue) -> None:
    worker = procs.start(concurrency=4)
    gather = queue.registry.get("gather")
    with Session(engine) as s, s.begin():
        ok, dies = queue.enqueue_many(s, [step(queue, 1), step(queue, 2, "die")])
        cancelled = queue.enqueue(s, gather(), after=[ok, dies]).id
        runs = queue.enqueue(s, gather(), after=[ok, dies], if_parent_dead="run").id
        follower = queue.enqueue(s, gather(), after=[cancelled], if_parent_dead="run").id
        ok_id, dies_id = ok.id, dies.id
    with Session(engine) as s:
        queue.enqueue(s, gather(), after=[ok_id])
        s.rollback()
    wait_for(engine, f"SELECT count(*) FROM {prefix}_gathered", 2)
    wait_for(engine, f"SELECT count(*) FROM {prefix}_jobs WHERE status IN ('pending', 'claimed')", 0)
    assert procs.stop(worker) == 0
    assert {r.job_id: (r.parents, r.total) for r in rows(engine, f"SELECT * FROM {prefix}_gathered")} == {
        runs: (2, 1), follower: (1, 0)}
    [(status, note)] = rows(engine, f"""SELECT j.status, e.note FROM {prefix}_jobs AS j
                                        JOIN {prefix}_journal AS e ON e.job_id = j.id WHERE j.id = :i""",
                            i=cancelled)
    assert status == "dead" and dies_id in note
    assert scalar(engine, f"SELECT count(*) FROM {prefix}_jobs") == 5  # the rolled-back one left nothing
    assert scalar(engine, f"SELECT count(*) FROM {prefix}_parents") == 5
