"""Crashes of real worker processes: SIGKILL, crash loops, zombies, injected failures."""

from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from support.reliability import Probe, WorkerProc, enqueue
from support.waiting import wait_until as wait_for

from venturi_sa import Queue

pytestmark = pytest.mark.slow


@pytest.mark.timeout(300)
def test_no_double_processing_across_six_workers(db: sa.Engine, queue: Queue, probe: Probe,
                                                 workers: Any) -> None:
    """2,000 jobs, 6 processes x 4 threads, half LISTEN, half polling: each runs exactly once."""
    procs = [workers(f"venturi-worker-{i}", concurrency=4, listen="on" if i % 2 else "off",
                     poll_interval=0.5) for i in range(6)]
    for proc in procs:
        proc.started()
    for _ in range(4):
        enqueue(db, queue, [{"n": i} for i in range(500)])
    wait_for(lambda: probe.count("completed") == 2000 or not all(p.alive() for p in procs), 240,
             "2,000 completions")
    assert all(p.alive() for p in procs)
    assert probe.statuses() == {"completed": 2000}
    assert probe.scalar("SELECT count(*) FROM {p}_side") == 2000
    assert probe.scalar("SELECT count(DISTINCT job_id) FROM {p}_side") == 2000
    assert probe.scalar("SELECT count(*) FROM {p}_journal WHERE outcome = 'completed'") == 2000
    assert probe.scalar("SELECT max(run_count) FROM {p}_jobs") == 1
    by_pid = probe.rows("SELECT pid, count(*) FROM {p}_side GROUP BY pid")
    assert len(by_pid) >= 2, f"work was not spread over the processes: {by_pid}"
    print(f"METRIC six-workers: 2000 jobs, {len(by_pid)} processes did work, 0 duplicates")


def test_sigkill_mid_job_is_recovered_and_completes_once(db: sa.Engine, queue: Queue, probe: Probe,
                                                         workers: Any) -> None:
    """A worker killed mid-job: another recovers it after lease + recover interval and completes it once."""
    lease, recover = 2.0, 0.5
    victim = workers("victim", concurrency=1, lease=lease, recover_interval=recover).started()
    (job_id,) = enqueue(db, queue, [{"mode": "sleep_once", "sleep": 60}])
    wait_for(lambda: probe.side(job_id), 15, "the job to start in the victim")
    # Started after the claim, the rescuer can get the job only through recovery.
    rescuer = workers("rescuer", concurrency=1, lease=lease, recover_interval=recover).started()
    victim.signal(signal.SIGKILL)
    killed_at = time.monotonic()
    victim.wait(10)
    wait_for(lambda: probe.job(job_id).status == "completed", 30, "the recovered job to complete")
    took = time.monotonic() - killed_at
    assert took < lease + recover + 5.0, f"recovery took {took:.1f}s"
    print(f"METRIC sigkill: completed {took:.2f}s after the kill (lease {lease}s, recover {recover}s)")
    assert probe.journal(job_id) == [(1, "stale-recovered"), (2, "completed")]
    runs = probe.side(job_id)
    assert [(r.run_no, r.pid) for r in runs] == [(1, victim.pid), (2, rescuer.pid)]
    row = probe.job(job_id)
    assert (row.run_count, row.failure_count, row.claimed_by) == (2, 1, None)


def _supervise(start: Any, until: Any, timeout: float) -> list[WorkerProc]:
    """Restart the worker each time it dies until ``until()``; returns every process started."""
    procs = [start()]
    deadline = time.monotonic() + timeout
    while not until():
        assert time.monotonic() < deadline, f"gave up after {len(procs) - 1} crashes:\n{procs[-1].output()[-3000:]}"
        if not procs[-1].alive():
            procs.append(start())
        time.sleep(0.05)
    return procs


def test_crash_looping_poison_job_dies_after_max_failures(db: sa.Engine, queue: Queue, probe: Probe,
                                                          workers: Any) -> None:
    """A handler that kills its process on every run: exactly 3 runs, then dead; 50 others complete."""
    normal = enqueue(db, queue, [{"n": i} for i in range(25)])
    (poison,) = enqueue(db, queue, [{"mode": "exit"}], kind="poison")
    normal += enqueue(db, queue, [{"n": i} for i in range(25, 50)])

    def settled() -> bool:
        return probe.job(poison).status == "dead" and probe.count("completed") == 50

    procs = _supervise(lambda: workers("crashy", concurrency=4, lease=1, recover_interval=0.3), settled, 120)
    assert [p.proc.returncode for p in procs] == [3, 3, 3, None]
    assert len(probe.side(poison)) == 3
    assert probe.journal(poison) == [(1, "stale-recovered"), (2, "stale-recovered"), (3, "stale-recovered")]
    row = probe.job(poison)
    assert (row.status, row.failure_count, row.run_count) == ("dead", 3, 3)
    assert probe.statuses() == {"completed": 50, "dead": 1}
    extra = probe.scalar("SELECT count(*) FROM {p}_side") - 53
    print(f"METRIC poison: 3 crashes, dead; 50 others completed; {extra} re-executions of in-flight jobs")


def test_zombie_worker_is_fenced(db: sa.Engine, queue: Queue, probe: Probe, workers: Any) -> None:
    """A stopped past its lease, B recovers and completes; A resumes: nothing of A's run is kept."""
    a = workers("zombie", concurrency=1, lease=1, recover_interval=0.3).started()
    (job_id,) = enqueue(db, queue, [{"mode": "biz_sleep_once", "sleep": 2}])
    wait_for(lambda: probe.side(job_id), 15, "A to start the job")
    a.signal(signal.SIGSTOP)
    b = workers("rescuer", concurrency=1, lease=1, recover_interval=0.3).started()
    wait_for(lambda: probe.job(job_id).status == "completed", 30, "B to complete the job")
    a.signal(signal.SIGCONT)
    wait_for(lambda: "lease lost" in a.output(), 30, "A's lease-lost warning")
    assert a.alive() and b.alive()
    assert probe.journal(job_id) == [(1, "stale-recovered"), (2, "completed")]
    assert probe.biz(job_id) == 1
    assert probe.rows("SELECT run_no, pid FROM {p}_biz")[0] == (2, b.pid)
    row = probe.job(job_id)
    assert (row.status, row.run_count) == ("completed", 2)
    assert "WARNING" in a.output().split("lease lost")[0].splitlines()[-1]


def _stopped(pid: int) -> bool:
    """``pid`` is stopped by a signal (state ``T`` in ``/proc/<pid>/stat``)."""
    return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] == "T"


def test_worker_frozen_between_claim_and_start_does_not_start_the_lost_run(db: sa.Engine, queue: Queue,
                                                                          probe: Probe, workers: Any) -> None:
    """A stops itself right after its claim, before the handler starts, past its lease; B recovers and
    completes the job; A resumes: A's handler never starts, the run is dropped as lost, logged once."""
    a = workers("frozen", concurrency=1, lease=1, recover_interval=0.3, stop_after_claim="on").started()
    (job_id,) = enqueue(db, queue, [{"mode": "ok"}])
    wait_for(lambda: _stopped(a.pid), 15, "A to stop itself between its claim and the handler's start")
    assert probe.job(job_id).claimed_by.startswith("frozen:") and probe.side(job_id) == []
    b = workers("rescuer", concurrency=1, lease=1, recover_interval=0.3).started()
    wait_for(lambda: probe.job(job_id).status == "completed", 30, "B to recover and complete the job")
    a.signal(signal.SIGCONT)
    wait_for(lambda: f"'job_id': '{job_id}', 'kind': 'work', 'outcome'" in a.output(), 30,
             "A's finished event for the run")
    assert [(r.run_no, r.pid) for r in probe.side(job_id)] == [(2, b.pid)]  # A's handler never started
    assert probe.journal(job_id) == [(1, "stale-recovered"), (2, "completed")]
    out = a.output()
    assert out.count("not started") == 1 and "WARNING" in out.split("not started")[0].splitlines()[-1]
    assert f"EVENT lost_before_start {{'job_id': '{job_id}'" in out
    assert a.alive() and b.alive()


INJECTIONS = ["fail_before_flush_once", "fail_before_commit_once", "kill_before_commit_once",
              "kill_after_commit_once"]


def test_exactly_once_database_effects(db: sa.Engine, queue: Queue, probe: Probe, workers: Any) -> None:
    """Failures and SIGKILL around the handler's session commit: one business row, completed, each."""
    ids = dict(zip(INJECTIONS, enqueue(db, queue, [{"mode": m} for m in INJECTIONS]), strict=True))

    def settled() -> bool:
        return probe.count("completed") == len(INJECTIONS)

    procs = _supervise(lambda: workers("exactly-once", concurrency=1, lease=1, recover_interval=0.3),
                       settled, 90)
    # Each SIGKILL injection fires on its job's first execution only: two processes die of it.
    wait_for(lambda: sum(not p.alive() for p in procs) == 2, 10, "the second SIGKILL")
    assert [p.proc.returncode for p in procs if not p.alive()] == [-signal.SIGKILL] * 2
    for mode, job_id in ids.items():
        journal = [o for _, o in probe.journal(job_id)]
        assert probe.biz(job_id) == 1, (mode, journal)
        assert probe.job(job_id).status == "completed", (mode, journal)
        assert journal.count("completed") == 1 and journal[-1] == "completed", (mode, journal)
    # A crash may strand a job claimed ahead but not started (a stale-recovered run with no execution).
    for mode in ("fail_before_flush_once", "fail_before_commit_once"):
        assert [o for o in (o for _, o in probe.journal(ids[mode])) if o != "stale-recovered"] == [
            "retried", "completed"], mode
    assert "stale-recovered" in [o for _, o in probe.journal(ids["kill_before_commit_once"])]
    # Killed just after its commit: the outcome was already durable, so it never ran again.
    assert len(probe.side(ids["kill_after_commit_once"])) == 1
    assert len(probe.side(ids["kill_before_commit_once"])) == 2


def test_graceful_stop_within_grace(db: sa.Engine, queue: Queue, probe: Probe, workers: Any) -> None:
    """SIGTERM: running jobs finish, nothing more is claimed, exit 0."""
    w = workers("graceful", concurrency=2, grace=30).started()
    ids = enqueue(db, queue, [{"mode": "sleep", "sleep": 1.5} for _ in range(8)])
    # Both slots busy with 1.5 s jobs: no claim can happen before the signal lands.
    wait_for(lambda: probe.scalar("SELECT count(*) FROM {p}_side") >= 2, 15, "both slots busy")
    w.signal(signal.SIGTERM)
    started = {r.job_id for r in probe.rows("SELECT job_id FROM {p}_side")}
    assert w.wait(30) == 0
    assert len(started) == 2
    for job_id in ids:
        row = probe.job(job_id)
        if job_id in started:
            assert (row.status, row.run_count) == ("completed", 1)
        else:
            assert (row.status, row.run_count) == ("pending", 0), "claimed after the signal"


def test_graceful_stop_past_grace_releases(db: sa.Engine, queue: Queue, probe: Probe, workers: Any) -> None:
    """Jobs still running when grace ends are released (no failure) and later complete exactly once."""
    w = workers("impatient", concurrency=2, grace=1).started()
    ids = enqueue(db, queue, [{"mode": "sleep_once", "sleep": 60} for _ in range(2)])
    wait_for(lambda: probe.scalar("SELECT count(*) FROM {p}_side") == 2, 15, "both jobs running")
    w.signal(signal.SIGTERM)
    assert w.wait(30) == 0
    for job_id in ids:
        row = probe.job(job_id)
        assert (row.status, row.failure_count, row.claimed_by) == ("pending", 0, None)
        assert probe.journal(job_id) == [(1, "released")]
    workers("after", concurrency=2).started()
    wait_for(lambda: probe.count("completed") == 2, 30, "released jobs to complete")
    for job_id in ids:
        assert probe.journal(job_id) == [(1, "released"), (2, "completed")]


def test_second_sigterm_stops_at_once(db: sa.Engine, queue: Queue, probe: Probe, workers: Any) -> None:
    """A second SIGTERM (or SIGINT) skips the rest of the grace period and releases at once."""
    w = workers("hurried", concurrency=2, grace=120).started()
    ids = enqueue(db, queue, [{"mode": "sleep_once", "sleep": 120} for _ in range(2)])
    wait_for(lambda: probe.scalar("SELECT count(*) FROM {p}_side") == 2, 15, "both jobs running")
    w.signal(signal.SIGTERM)
    wait_for(lambda: "again to stop now" in w.output(), 10, "the first signal to be handled")
    sent = time.monotonic()
    w.signal(signal.SIGINT)
    assert w.wait(30) == 0
    assert time.monotonic() - sent < 20  # far less than the 120 s grace
    for job_id in ids:
        assert probe.journal(job_id) == [(1, "released")]
        assert probe.job(job_id).failure_count == 0
