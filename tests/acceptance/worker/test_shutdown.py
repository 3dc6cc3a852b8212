"""Defect 8: shutdown neither runs a run it released nor exits before its outcomes are written."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import uuid
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from cli_app import Hold, marks_ddl
from support.paths import APPS
from support.probes import Background, outcomes, scalar
from support.waiting import Events, wait_until
from support.workers import enqueue, job_row

from venturi_sa import JobContext, Queue, Task, Worker

HERE = APPS


# Regression test of defect 8a (worker hardening issue): failed on e53c386.
def test_stop_now_never_runs_a_run_it_released(engine: sa.Engine, models: Any) -> None:
    invoked: dict[str, threading.Event] = {}

    class Step(Task):
        KIND = "step"

        def run(self, ctx: JobContext) -> None:
            invoked.setdefault(ctx.job_id, threading.Event()).set()

    queue = Queue(models, [Step])
    ids = enqueue(engine, queue, Step(), Step(), Step())
    for job_id in ids:
        invoked[job_id] = threading.Event()
    events = Events()
    worker = Worker(queue, engine, concurrency=1, poll_interval=0.1, listen=False, grace=0, on_event=events)
    claims: list[str] = []

    def on_claimed(data: dict[str, Any]) -> None:
        claims.append(data["job_id"])
        if len(claims) == 2:  # the second run is claimed, not started: stop now
            worker.stop(now=True)

    events.hooks["claimed"] = on_claimed
    bg = Background(worker).start()
    bg.thread.join(15)
    assert not bg.thread.is_alive() and not bg.errors, bg.errors
    second = claims[1]
    ran = invoked[second].wait(3)  # a released run's handler, if it runs at all, starts at once
    row = job_row(engine, models, second)
    journal = outcomes(engine, models, second)
    released = (1, "released") in journal
    assert not (released and ran), (
        f"job {second} was released (status {row.status}, journal {journal}) and its handler still ran "
        "in the stopped worker")
    assert released or journal, f"job {second}: neither released nor recorded (journal {journal})"


# Regression test of defect 8b (worker hardening issue): failed on e53c386.
@pytest.mark.timeout(60)
def test_cli_worker_at_sigterm_waits_for_finished_outcomes(pg_url: str, engine: sa.Engine, models: Any,
                                                           prefix: str, tmp_path: Path) -> None:
    """One run is left over at SIGTERM (released); another finished just before: its outcome must land.

    The finisher's journal INSERT waits (a trigger) for an advisory lock the test holds until
    SIGTERM + 5 s, so its outcome is still being written when the worker shuts down.  Only
    ``hold`` (60 s lease: renewed every 20 s) runs, so no lease renewal queues behind that write.
    """
    with engine.begin() as conn:
        conn.execute(sa.text(marks_ddl(prefix)))
    queue = Queue(models, [Hold])
    [blocker, finisher] = enqueue(engine, queue, Hold(mode="block"), Hold(mode="gate"))
    key = 815
    with engine.begin() as conn:  # the finisher's journal row waits for an advisory lock the test holds
        conn.execute(sa.text(f"""
            CREATE FUNCTION {prefix}_hold() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                IF NEW.job_id = '{finisher}' THEN PERFORM pg_advisory_xact_lock({key}); END IF;
                RETURN NEW;
            END $$"""))
        conn.execute(sa.text(f"CREATE TRIGGER {prefix}_hold BEFORE INSERT ON {prefix}_journal "
                             f"FOR EACH ROW EXECUTE FUNCTION {prefix}_hold()"))
    gate = tmp_path / "gate"
    log = tmp_path / "worker.log"
    app = f"hard-cli-{uuid.uuid4().hex[:10]}"
    dsn = pg_url.replace("postgresql+psycopg2://", "postgresql://", 1)
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("VENTURI_")},
           "HARD_PREFIX": prefix, "HARD_DSN": pg_url, "HARD_GATE": str(gate)}
    log_file = log.open("w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "venturi_sa", "worker", "cli_app:queue", "--dsn", f"{dsn}?application_name={app}",
         "--kinds", "hold", "--concurrency", "2", "--poll-interval", "0.2", "--grace", "1", "--no-listen"],
        cwd=HERE, env=env, stdout=subprocess.DEVNULL, stderr=log_file, text=True)
    marks = f"SELECT count(*) FROM {prefix}_marks WHERE job_id = :j AND mark = :m"
    try:
        wait_until(lambda: scalar(engine, marks, j=blocker, m="started") and scalar(engine, marks, j=finisher,
                                                                                    m="started"),
                   what=f"both runs to start; worker log: {log.read_text()[-2000:]}")
        with engine.connect() as holder:
            holder.execute(sa.text("SELECT pg_advisory_xact_lock(:k)"), {"k": key})
            gate.touch()  # the finisher returns; its outcome write now waits for the test's lock
            wait_until(lambda: scalar(engine, marks, j=finisher, m="returning"), what="the finisher to return")
            wait_until(lambda: scalar(engine, "SELECT count(*) FROM pg_stat_activity WHERE application_name = :a "
                                              "AND wait_event = 'advisory'", a=app),
                       what="the outcome write to wait on the test's lock")
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(5)  # a fixed worker keeps waiting for its outcome write; that is fine

            except subprocess.TimeoutExpired:
                pass
            holder.rollback()  # the outcome write can go through now
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        log_file.close()
    err = log.read_text()
    assert proc.returncode == 0, err
    row = job_row(engine, models, finisher)
    journal = outcomes(engine, models, finisher)
    assert (row.status, journal) == ("completed", [(1, "completed")]), (
        f"the finished run was left {row.status} with journal {journal}; worker log tail: "
        f"{err.strip().splitlines()[-1] if err.strip() else ''}")
    assert outcomes(engine, models, blocker) == [(1, "released")]
    assert "processed 0 jobs" not in err
