"""A stop signal at any moment of a supervised child's start-up ends that child with status 0.

A spawned child runs no venturi code until the interpreter has started and
the target was unpickled; the supervisor spawns it with SIGTERM and SIGINT
blocked, and the child unblocks them once its quiet-exit handler is
installed.  Real processes throughout: ``python procs_app.py 2`` (a Supervisor
whose children can be held while they import the app as ``__mp_main__``,
before any handler of theirs, and whose spawn seam can wait), and
``venturi worker procs_app:queue --processes 2``, stopped right after a
respawn, once the respawned worker runs, and while the command itself waits
for the database before any worker process exists.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy.orm import Session
from support.paths import APPS
from support.processes import Supervised
from support.waiting import wait_until

from venturi_sa import Queue, make_models

pytestmark = pytest.mark.timeout(180)
WAIT = 60.0
SIGTERM_BIT = 1 << (signal.SIGTERM - 1)


def environment(pg_url: str, prefix: str, **more: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("VENTURI_")}
    return {**env, "PROCS_PREFIX": prefix, "PROCS_DSN": pg_url, **more}


def sigterm_pending(pid: int) -> bool | None:
    """Whether a SIGTERM waits, blocked, for process ``pid``; None once the process is gone (or a zombie)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return None
    fields = dict(line.split(":\t", 1) for line in status.splitlines() if ":\t" in line)
    if fields["State"].startswith("Z"):
        return None
    return bool((int(fields["ShdPnd"], 16) | int(fields["SigPnd"], 16)) & SIGTERM_BIT)


def exit_statuses(log: str) -> list[str]:
    return [line.rsplit(" ", 1)[1] for line in log.splitlines() if "exited with status" in line]


def claimed(engine: sa.Engine, prefix: str) -> int:
    with engine.connect() as conn:
        return int(conn.execute(sa.text(f"SELECT count(*) FROM {prefix}_jobs WHERE status = 'claimed'")).scalar())


def enqueue(engine: sa.Engine, prefix: str, n: int) -> None:
    import procs_app

    queue = Queue(make_models(prefix), [procs_app.whoami])
    with Session(engine) as session, session.begin():
        queue.enqueue_many(session, [procs_app.whoami() for _ in range(n)])


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    return tmp_path


@pytest.fixture
def supervised_app(pg_url: str, prefix: str, models: object, folder: Path) -> Iterator[Supervised]:
    """``python procs_app.py 2`` with its children held in their start-up and its spawn seam."""
    (folder / "hold").mkdir()
    env = environment(pg_url, prefix, PROCS_HOLD=str(folder / "hold"), PROCS_SPAWN_FAULT=str(folder / "spawn"))
    s = Supervised([sys.executable, "procs_app.py", "2"], env, APPS, WAIT)
    try:
        yield s
    finally:
        s.close()


def test_sigterm_while_children_import_before_their_handler_ends_each_with_status_0(
        supervised_app: Supervised, folder: Path, engine: sa.Engine, prefix: str) -> None:
    s, hold = supervised_app, folder / "hold"
    s.wait_for("two children started", lambda: len(s.children) == 2)
    pids = s.all_pids()
    wait_until(lambda: all((hold / f"held-{pid}").exists() for pid in pids), WAIT,
               "both children to be held in their start-up")
    s.proc.send_signal(signal.SIGTERM)
    # Forwarded to children that have no handler yet: it must wait for one (blocked), not kill them.
    wait_until(lambda: all(sigterm_pending(pid) is not False for pid in pids), WAIT,
               "the forwarded SIGTERM to reach both children")
    (hold / "go").touch()
    assert s.proc.wait(WAIT) == 0, s.log()
    s._reader.join(10)
    assert exit_statuses(s.log()) == ["0", "0"], s.log()
    assert "Traceback" not in s.log() and claimed(engine, prefix) == 0


def test_sigterm_while_the_supervisor_spawns_a_child_is_kept_and_forwarded(
        supervised_app: Supervised, folder: Path, engine: sa.Engine, prefix: str) -> None:
    s, spawn = supervised_app, folder / "spawn"
    (folder / "hold" / "go").touch()  # children start at once here
    s.wait_for("two children started", lambda: len(s.children) == 2)
    spawn.write_text("HOLD")
    os.kill(s.pid_of(0), signal.SIGKILL)
    wait_until(lambda: spawn.with_suffix(".held").exists(), WAIT, "the supervisor to be spawning process 0 again")
    s.proc.send_signal(signal.SIGTERM)
    wait_until(lambda: sigterm_pending(s.proc.pid) or "SIGTERM: stopping" in s.log(), WAIT,
               "the supervisor to get the SIGTERM")
    spawn.write_text("")
    assert s.proc.wait(WAIT) == 0, s.log()
    s._reader.join(10)
    log = s.log()
    assert "SIGTERM: stopping" in log and len(s.children[0]) == 2, log
    assert exit_statuses(log) == ["0", "0"], log  # the respawned child and the other one
    assert claimed(engine, prefix) == 0


@pytest.mark.parametrize("stage", ["spawned", "worker running"])
def test_sigterm_after_a_respawn_ends_every_worker_process_with_status_0(
        pg_url: str, prefix: str, models: object, engine: sa.Engine, stage: str) -> None:
    dsn = pg_url.replace("postgresql+psycopg2://", "postgresql://", 1)
    s = Supervised([sys.executable, "-m", "venturi_sa", "worker", "procs_app:queue", "--processes", "2",
                    "--dsn", dsn, "--concurrency", "2", "--poll-interval", "0.2", "--grace", "5"],
                   environment(pg_url, prefix), APPS, WAIT)
    try:
        s.wait_for("both workers started", lambda: len(s.children) == 2 and all(
            f":{pid} started" in s.log() for pid in s.all_pids()))
        os.kill(s.pid_of(0), signal.SIGKILL)
        s.wait_for("process 0 respawned", lambda: len(s.children[0]) == 2)
        respawned = s.pid_of(0)
        if stage == "worker running":
            s.wait_for("the respawned worker to start", lambda: f":{respawned} started" in s.log())
        enqueue(engine, prefix, 20)  # work for the workers that run while they are stopped
        s.proc.send_signal(signal.SIGTERM)  # "spawned": a few milliseconds after the spawn
        assert s.proc.wait(WAIT) == 0, s.log()
        s._reader.join(10)
        log = s.log()
        assert exit_statuses(log) == ["0", "0"], log
        assert "Traceback" not in log and claimed(engine, prefix) == 0
    finally:
        s.close()


def test_sigterm_while_the_command_waits_for_the_database_exits_0(pg_url: str, prefix: str) -> None:
    """Before the supervisor runs (no worker process yet), the command's start-up wait ends quietly."""
    s = Supervised([sys.executable, "-m", "venturi_sa", "worker", "procs_app:queue", "--processes", "2",
                    "--dsn", "postgresql://postgres@127.0.0.1:1/postgres", "--connect-timeout", "120"],
                   environment(pg_url, prefix), APPS, WAIT)
    try:
        s.wait_for("the command to wait for the database", lambda: "cannot reach the database at start" in s.log())
        s.proc.send_signal(signal.SIGTERM)
        assert s.proc.wait(WAIT) == 0, s.log()
        s._reader.join(10)
        assert s.children == {} and "Traceback" not in s.log()
    finally:
        s.close()
