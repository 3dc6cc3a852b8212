"""Issue 23, defect 4: the supervisor leaves no worker process behind, whatever happens to it.

Real processes throughout: ``python procs_app.py 2`` runs a Supervisor of
two worker processes whose ``start_child`` seam fails on demand (a file
says how), and ``venturi worker procs_app:queue --processes 2`` is the
command itself.  A restart that fails with EAGAIN is a death with backoff
(the supervisor and the other child stay up); an error the supervisor does
not expect stops, then kills, every child before it exits; a supervisor
killed with SIGKILL takes its children with it.
"""

from __future__ import annotations

import os
import re
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.paths import APPS
from support.processes import Supervised
from support.waiting import wait_until

pytestmark = pytest.mark.timeout(120)
HERE = APPS
WAIT = 45.0
NOT_STARTED = re.compile(r"worker process 0 could not be started \(.*\); trying again in ([\d.]+)s")


def alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie, waiting for a parent that is gone, has ended)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


def environment(pg_url: str, prefix: str, **more: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("VENTURI_")}
    return {**env, "PROCS_PREFIX": prefix, "PROCS_DSN": pg_url, **more}


@pytest.fixture
def fault(tmp_path: Path) -> Path:
    """The file that makes ``procs_app.start_child`` fail (absent: starts work)."""
    return tmp_path / "spawn-fault"


@pytest.fixture
def seamed(pg_url: str, prefix: str, models: object, fault: Path) -> Iterator[Supervised]:
    """``python procs_app.py 2``, both children started."""
    s = Supervised([sys.executable, "procs_app.py", "2"],
                   environment(pg_url, prefix, PROCS_SPAWN_FAULT=str(fault)), HERE, WAIT)
    try:
        s.wait_for("both children to start", lambda: len(s.children) == 2)
        yield s
    finally:
        s.close()


def test_a_restart_that_fails_with_eagain_is_a_death_with_backoff(seamed: Supervised, fault: Path) -> None:
    fault.write_text("EAGAIN")
    first, other = seamed.pid_of(0), seamed.pid_of(1)
    os.kill(first, signal.SIGKILL)
    seamed.wait_for("three failed starts of process 0", lambda: len(NOT_STARTED.findall(seamed.log())) >= 3)
    delays = [float(d) for d in NOT_STARTED.findall(seamed.log())]
    assert delays == sorted(delays) and delays[0] < delays[-1], delays  # backoff, growing
    assert seamed.proc.poll() is None, seamed.log()  # the supervisor stays up
    assert alive(other)  # and so does the other child

    fault.unlink()
    seamed.wait_for("process 0 to start again", lambda: len(seamed.children[0]) == 2)
    seamed.proc.send_signal(signal.SIGTERM)
    assert seamed.proc.wait(WAIT) == 0, seamed.log()
    assert not [pid for pid in seamed.all_pids() if alive(pid)]


def test_an_unexpected_error_in_the_supervisor_stops_then_kills_every_child(seamed: Supervised,
                                                                           fault: Path) -> None:
    fault.write_text("BUG")
    other = seamed.pid_of(1)
    os.kill(seamed.pid_of(0), signal.SIGKILL)  # its restart raises RuntimeError in Supervisor.run
    code = seamed.proc.wait(WAIT)
    assert code != 0, seamed.log()
    assert "injected supervisor bug" in seamed.log()
    wait_until(lambda: not alive(other), 10, f"child {other} to end with its supervisor")


def test_the_children_end_when_the_supervisor_is_killed(pg_url: str, prefix: str, models: object) -> None:
    dsn = pg_url.replace("postgresql+psycopg2://", "postgresql://", 1)
    s = Supervised([sys.executable, "-m", "venturi_sa", "worker", "procs_app:queue", "--processes", "2",
                    "--dsn", dsn, "--concurrency", "2", "--poll-interval", "0.2", "--grace", "5"],
                   environment(pg_url, prefix), HERE, WAIT)
    try:
        s.wait_for("both children to start", lambda: len(s.children) == 2)
        pids = s.all_pids()
        s.proc.send_signal(signal.SIGKILL)
        s.proc.wait(10)
        wait_until(lambda: not [pid for pid in pids if alive(pid)], 30,
                   f"the children {pids} to end after their supervisor was killed")
    finally:
        s.close()
