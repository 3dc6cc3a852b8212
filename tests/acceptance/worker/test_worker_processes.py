"""Real worker processes: draining in parallel, SIGKILL mid-job, SIGTERM with a grace period."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa
import worker_app
from sqlalchemy.orm import Session
from support.processes import PROCESS_WAIT, Procs, app_procs
from support.waiting import wait_until

WAIT = PROCESS_WAIT


@pytest.fixture
def procs(pg_url: str, engine: sa.Engine, models: Any, prefix: str) -> Iterator[Procs]:
    yield from app_procs(worker_app, engine, pg_url, prefix)


def scalar(engine: sa.Engine, sql: str, **params: Any) -> Any:
    with engine.connect() as conn:
        return conn.execute(sa.text(sql), params).scalar()


def wait_for(engine: sa.Engine, sql: str, expected: Any, timeout: float = WAIT, **params: Any) -> None:
    wait_until(lambda: scalar(engine, sql, **params) == expected, timeout, f"{sql!r} to be {expected!r}", every=0.1)


def enqueue(engine: sa.Engine, prefix: str, *modes: str) -> list[str]:
    queue = worker_app.build_queue(prefix, engine)
    work = queue.registry.get("work")
    with Session(engine) as session, session.begin():
        return [job.id for job in queue.enqueue_many(session, [work(n=n, mode=m) for n, m in enumerate(modes)])]


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_four_processes_drain_5000_jobs_exactly_once(engine: sa.Engine, prefix: str, procs: Procs) -> None:
    workers = [procs.start(concurrency=8) for _ in range(4)]
    assert scalar(engine, "SELECT count(*) FROM pg_stat_activity WHERE application_name = :a",
                  a=worker_app.app_name(prefix)) > 0
    ids = enqueue(engine, prefix, *["ok"] * 5000)  # one commit, one NOTIFY wakes all four
    wait_for(engine, f"SELECT count(*) FROM {prefix}_jobs WHERE status = 'completed'", 5000)
    assert [procs.stop(w) for w in workers] == [0, 0, 0, 0]
    j = f"{prefix}_journal"
    # exactly one journal row per job, and it is `completed`
    assert scalar(engine, f"SELECT count(*) FROM {j}") == 5000
    assert scalar(engine, f"SELECT count(DISTINCT job_id) FROM {j} WHERE outcome = 'completed'") == 5000
    assert scalar(engine, f"SELECT count(*) FROM {prefix}_jobs WHERE run_count <> 1 OR failure_count <> 0") == 0
    # the handlers' ctx.session writes: exactly one per job, none lost, none doubled
    assert scalar(engine, f"SELECT count(*) FROM {prefix}_side") == 5000
    assert scalar(engine, f"SELECT count(DISTINCT job_id) FROM {prefix}_side") == 5000
    assert scalar(engine, f"SELECT count(*) FROM {prefix}_side WHERE job_id = ANY(:ids)", ids=ids) == 5000
    assert scalar(engine, f"SELECT count(DISTINCT pid) FROM {prefix}_side") >= 2


@pytest.mark.slow
def test_sigkill_mid_job_is_recovered_and_completes_exactly_once(engine: sa.Engine, prefix: str,
                                                                 procs: Procs) -> None:
    [job_id, *others] = enqueue(engine, prefix, "block_once", "ok", "ok")
    victim = procs.start(lease=2)
    wait_for(engine, f"SELECT count(*) FROM {prefix}_started", 1)
    victim.kill()  # SIGKILL: no release, no outcome, the lease is left to expire
    assert victim.wait(10) == -signal.SIGKILL
    assert scalar(engine, f"SELECT status FROM {prefix}_jobs WHERE id = :i", i=job_id) == "claimed"
    rescuer = procs.start(lease=2)
    wait_for(engine, f"SELECT status FROM {prefix}_jobs WHERE id = :i", "completed", i=job_id)
    assert procs.stop(rescuer) == 0
    with engine.connect() as conn:
        journal = conn.execute(sa.text(f"SELECT outcome, run_no FROM {prefix}_journal WHERE job_id = :i "
                                       "ORDER BY id"), {"i": job_id}).all()
        side = conn.execute(sa.text(f"SELECT run_no, pid FROM {prefix}_side WHERE job_id = :i"),
                            {"i": job_id}).all()
    assert [tuple(r) for r in journal] == [("stale-recovered", 1), ("completed", 2)]
    assert [(r.run_no, r.pid) for r in side] == [(2, rescuer.pid)]
    assert scalar(engine, f"SELECT failure_count FROM {prefix}_jobs WHERE id = :i", i=job_id) == 1
    assert scalar(engine, f"SELECT count(*) FROM {prefix}_jobs WHERE status = 'completed' AND id = ANY(:o)",
                  o=others) == 2


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_signal_stops_the_worker_and_releases_what_is_still_running(engine: sa.Engine, prefix: str,
                                                                    procs: Procs, sig: int) -> None:
    [job_id] = enqueue(engine, prefix, "block")
    worker = procs.start(grace=0.5)
    wait_for(engine, f"SELECT count(*) FROM {prefix}_started", 1)
    assert procs.stop(worker, sig) == 0
    with engine.connect() as conn:
        row = conn.execute(sa.text(f"SELECT status, failure_count, run_count, claimed_by FROM {prefix}_jobs "
                                   "WHERE id = :i"), {"i": job_id}).one()
        journal = conn.execute(sa.text(f"SELECT outcome, run_no FROM {prefix}_journal WHERE job_id = :i"),
                               {"i": job_id}).all()
    assert tuple(row) == ("pending", 0, 1, None)
    assert [tuple(r) for r in journal] == [("released", 1)]
    assert scalar(engine, f"SELECT count(*) FROM {prefix}_side") == 0
    # the worker closed its connections on the way out
    wait_for(engine, "SELECT count(*) FROM pg_stat_activity WHERE application_name = :a", 0,
             a=worker_app.app_name(prefix), timeout=10)
