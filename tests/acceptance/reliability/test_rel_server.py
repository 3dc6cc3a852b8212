"""The server misbehaves under running workers: restarts, killed backends, long outages."""

from __future__ import annotations

import re
import subprocess
import time
from typing import Any

import pytest
import sqlalchemy as sa
from support.reliability import Probe, WorkerProc, enqueue
from support.waiting import wait_until as wait_for

from venturi_sa import Queue
from venturi_sa.devtools.throwaway import ThrowawayCluster

pytestmark = pytest.mark.slow


def _completed_after(probe: Probe, start: int, timeout: float) -> float:
    """Seconds until the completed count rises above ``start``."""
    began = time.monotonic()
    wait_for(lambda: probe.count("completed") > start, timeout, "work to resume")
    return time.monotonic() - began


@pytest.mark.timeout(200)
def test_postgres_restart_mid_stream(cluster: ThrowawayCluster, db: sa.Engine, queue: Queue, probe: Probe,
                                     workers: Any) -> None:
    """pg_ctl restart -m fast while 500 ctx.session jobs flow through 3 workers."""
    procs = [workers(f"venturi-worker-{i}", concurrency=4, lease=3, recover_interval=0.5,
                     listen="on" if i else "off", poll_interval=1).started() for i in range(3)]
    enqueue(db, queue, [{"mode": "biz", "sleep": 0.05, "n": i} for i in range(500)])
    wait_for(lambda: probe.count("completed") >= 50, 60, "the stream to start")
    cluster.pg_ctl("restart", "-m", "fast")
    before = probe.count("completed")
    assert before < 500, "the stream finished before the restart; make the jobs slower"
    resumed = _completed_after(probe, before, 30)
    wait_for(lambda: probe.count("completed") == 500, 120, "all 500 jobs")
    assert all(p.alive() for p in procs), [p.output()[-2000:] for p in procs if not p.alive()]
    assert probe.statuses() == {"completed": 500}
    assert probe.scalar("SELECT count(*) FROM {p}_biz") == 500
    assert probe.scalar("SELECT max(c) FROM (SELECT count(*) c FROM {p}_biz GROUP BY job_id) s") == 1
    executions = probe.scalar("SELECT count(*) FROM {p}_side")
    # Re-executions only of runs in flight at the restart (3 workers x 4 slots, plus claimed-ahead).
    assert executions - 500 <= 24, executions
    assert resumed < 20
    print(f"METRIC restart: resumed {resumed:.2f}s after pg_ctl restart returned; "
          f"{executions - 500} re-executions; 0 duplicate business rows")


def _backends(probe: Probe, name: str) -> list[Any]:
    return probe.rows("SELECT pid, query FROM pg_stat_activity WHERE application_name LIKE :n",
                      n=name + "%")


def _listen_pid(probe: Probe, name: str) -> int | None:
    pids = [r.pid for r in _backends(probe, name) if r.query.startswith("LISTEN")]
    return pids[0] if pids else None


def test_killed_connections_listen_is_reestablished(db: sa.Engine, queue: Queue, probe: Probe,
                                                    workers: Any) -> None:
    """pg_terminate_backend on every backend of a worker: it reconnects and LISTENs again."""
    name = "venturi-worker-kc"
    w = workers(name, concurrency=2, poll_interval=30, listen="on").started()
    (warm,) = enqueue(db, queue, [{}])
    wait_for(lambda: probe.job(warm).status == "completed", 15, "a first job (pool connections open)")
    old_listen = wait_for(lambda: _listen_pid(probe, name), 15, "the LISTEN backend")
    victims = [r.pid for r in _backends(probe, name)]
    assert len(victims) >= 2
    with db.connect() as conn:
        for pid in victims:
            conn.execute(sa.text("SELECT pg_terminate_backend(:p)"), {"p": pid})
    new_listen = wait_for(lambda: (pid := _listen_pid(probe, name)) and pid not in victims and pid, 15,
                          "LISTEN to be re-established")
    assert new_listen != old_listen
    (job_id,) = enqueue(db, queue, [{}])
    sent = time.monotonic()
    wait_for(lambda: probe.side(job_id), 10, "the job enqueued after the kill to start")
    woke = time.monotonic() - sent
    assert woke < 2.0  # woken by NOTIFY, not the 30 s poll
    print(f"METRIC killed-connections: {len(victims)} backends killed; job started {woke:.2f}s after enqueue")
    wait_for(lambda: probe.job(job_id).status == "completed", 10, "it to complete")
    assert w.alive()


def _attempts(proc: WorkerProc, since: float, until: float) -> int:
    stamps = [float(t) for t in re.findall(r"CONNECT-ATTEMPT (\d+\.\d+)", proc.output())]
    return sum(since <= t <= until for t in stamps)


def _outage(proc: WorkerProc, seconds: float) -> tuple[float, float]:
    """Let the worker face a dead server for ``seconds``; it must not exit meanwhile."""
    began = time.time()
    with pytest.raises(subprocess.TimeoutExpired):
        proc.wait(seconds)
    return began, time.time()


def test_database_down_at_start_and_long_outage(cluster: ThrowawayCluster, db: sa.Engine, queue: Queue,
                                                probe: Probe, workers: Any) -> None:
    """No server at start, then a long outage: the worker stays up, retries gently, resumes."""
    cluster.pg_ctl("stop", "-m", "fast")
    w = workers("venturi-worker-down", concurrency=2, poll_interval=1, listen="on", lease=3)
    began, ended = _outage(w, 5.0)
    attempts = _attempts(w, began, ended)
    assert 1 <= attempts <= 10 * (ended - began), f"{attempts} connection attempts in {ended - began:.1f}s"
    cluster.pg_ctl("start")
    up = time.monotonic()
    (first,) = enqueue(db, queue, [{}])
    wait_for(lambda: probe.job(first).status == "completed", 30, "the first job after the server started")
    first_took = time.monotonic() - up
    assert first_took < 15
    print(f"METRIC down-at-start: {attempts} connection attempts in {ended - began:.1f}s; "
          f"job done {first_took:.2f}s after start")

    cluster.pg_ctl("stop", "-m", "fast")
    began, ended = _outage(w, 8.0)
    attempts = _attempts(w, began, ended)
    assert attempts <= 10 * (ended - began), f"{attempts} connection attempts in {ended - began:.1f}s"
    assert "not claiming until the database is back" in w.output()
    cluster.pg_ctl("start")
    up = time.monotonic()
    (second,) = enqueue(db, queue, [{}])
    wait_for(lambda: probe.job(second).status == "completed", 30, "a job after the outage")
    second_took = time.monotonic() - up
    assert second_took < 15
    print(f"METRIC outage: {attempts} connection attempts in {ended - began:.1f}s; "
          f"job done {second_took:.2f}s after start")
    assert w.alive()
    assert probe.statuses() == {"completed": 2}
