"""``venturi worker --processes N``: real worker processes under the supervisor.

A child killed with SIGKILL is restarted (a new pid, which then runs jobs);
SIGTERM to the supervisor stops every child gracefully (status 0) and the
supervisor exits 0.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest
import sqlalchemy as sa
import supervised_app
from sqlalchemy.orm import Session
from support.paths import APPS
from support.processes import Supervised

from venturi_sa import Queue, make_models

HERE = APPS
WAIT = 90.0


def start_supervised(dsn: str, prefix: str, processes: int) -> Supervised:
    """``venturi worker supervised_app:queue --processes N`` on queue ``prefix``."""
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("VENTURI_")},
           "SUPERVISED_PREFIX": prefix, "VENTURI_DSN": dsn.replace("postgresql+psycopg2://", "postgresql://")}
    return Supervised(
        [sys.executable, "-m", "venturi_sa", "worker", "supervised_app:queue", "--processes", str(processes),
         "--concurrency", "2", "--poll-interval", "0.2", "--grace", "5"], env, HERE, WAIT)


@pytest.fixture
def supervised(pg_url: str, prefix: str, models: object) -> Iterator[Supervised]:
    s = start_supervised(pg_url, prefix, processes=2)
    try:
        yield s
    finally:
        s.close()


def run_jobs(engine: sa.Engine, queue: Queue, n: int) -> set[int]:
    """Enqueue ``n`` jobs, wait until all completed; the pids that ran them."""
    whoami = queue.registry.get("whoami")
    with Session(engine) as session, session.begin():
        ids = [job.id for job in queue.enqueue_many(session, [whoami() for _ in range(n)])]
    deadline = time.monotonic() + WAIT
    while True:
        jobs = [queue.get_job(engine, i) for i in ids]
        if all(j.status == "completed" for j in jobs):
            break
        assert time.monotonic() < deadline, [j.status for j in jobs]
        time.sleep(0.05)
    return {queue.journal(engine, i)[-1].attachment for i in ids}


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_killed_child_is_restarted_and_sigterm_stops_all(supervised: Supervised, engine: sa.Engine,
                                                          prefix: str) -> None:
    queue = Queue(make_models(prefix), [supervised_app.whoami])
    supervised.wait_for("two children started", lambda: len(supervised.children) == 2)
    first = {index: pids[0] for index, pids in supervised.children.items()}
    supervised.wait_for("both workers started",
                        lambda: all(f":{pid} started" in supervised.log() for pid in first.values()))
    assert run_jobs(engine, queue, 20) <= set(first.values())

    os.kill(first[0], signal.SIGKILL)
    supervised.wait_for("child 0 restarted", lambda: len(supervised.children[0]) == 2)
    restarted = supervised.children[0][1]
    supervised.wait_for("the restarted child's worker started", lambda: f":{restarted} started" in supervised.log())
    assert restarted != first[0] and not alive(first[0])
    assert "died (killed by SIGKILL)" in supervised.log()
    ran = run_jobs(engine, queue, 40)
    assert ran <= {restarted, first[1]} and ran, ran

    supervised.proc.send_signal(signal.SIGTERM)
    assert supervised.proc.wait(WAIT) == 0, supervised.log()
    supervised._reader.join(10)
    log = supervised.log()
    assert log.count("exited with status 0") == 2, log
    assert "Traceback" not in log
    assert not alive(restarted) and not alive(first[1])


def test_processes_must_be_positive(pg_url: str, prefix: str) -> None:
    result = subprocess.run([sys.executable, "-m", "venturi_sa", "worker", "supervised_app:queue",
                             "--processes", "0", "--dsn", pg_url], cwd=HERE, capture_output=True, text=True,
                            timeout=60, check=False)
    assert result.returncode == 2 and "--processes" in result.stderr
