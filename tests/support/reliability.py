"""Helpers of the reliability tier: waiting on conditions, worker processes, table probes."""

from __future__ import annotations

import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session

from support.paths import APPS
from support.waiting import wait_until
from venturi_sa import Queue

FAULT_APP = APPS / "fault_app.py"


class WorkerProc:
    """One ``fault_app.py`` worker process; its stderr goes to a file the test can read."""

    def __init__(self, url: str, prefix: str, name: str, **options: Any) -> None:
        self.name = name
        self.log = Path(tempfile.mkstemp(prefix=f"{name}-", suffix=".log")[1])
        argv = [sys.executable, str(FAULT_APP), "--dsn", url, "--prefix", prefix, "--name", name]
        for key, value in options.items():
            argv += [f"--{key.replace('_', '-')}", str(value)]
        self._out = self.log.open("wb")
        self.proc = subprocess.Popen(argv, stdout=self._out, stderr=subprocess.STDOUT)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def alive(self) -> bool:
        return self.proc.poll() is None

    def started(self, timeout: float = 30) -> WorkerProc:
        wait_until(lambda: "started: kinds=" in self.output() or not self.alive(), timeout, f"{self.name} start")
        assert self.alive(), self.output()
        return self

    def signal(self, sig: int) -> None:
        self.proc.send_signal(sig)

    def wait(self, timeout: float) -> int:
        return self.proc.wait(timeout=timeout)

    def close(self) -> None:
        if self.alive():
            self.proc.send_signal(signal.SIGCONT)
            self.proc.kill()
            self.proc.wait(timeout=10)
        self._out.close()
        self.log.unlink(missing_ok=True)



class Probe:
    """Read-only views of one prefix's tables, for assertions."""

    def __init__(self, db: sa.Engine, prefix: str) -> None:
        self.db = db
        self.prefix = prefix

    def rows(self, sql: str, **params: Any) -> list[Any]:
        with self.db.connect() as conn:
            return list(conn.execute(sa.text(sql.replace("{p}", self.prefix)), params).all())

    def scalar(self, sql: str, **params: Any) -> Any:
        with self.db.connect() as conn:
            return conn.execute(sa.text(sql.replace("{p}", self.prefix)), params).scalar()

    def statuses(self) -> dict[str, int]:
        return dict(self.rows("SELECT status, count(*) FROM {p}_jobs GROUP BY status"))  # type: ignore[arg-type]

    def count(self, status: str) -> int:
        return int(self.scalar("SELECT count(*) FROM {p}_jobs WHERE status = :s", s=status))

    def journal(self, job_id: str) -> list[tuple[int, str]]:
        return [tuple(r) for r in self.rows(
            "SELECT run_no, outcome FROM {p}_journal WHERE job_id = :j ORDER BY id", j=job_id)]

    def job(self, job_id: str) -> Any:
        return self.rows("SELECT * FROM {p}_jobs WHERE id = :j", j=job_id)[0]

    def side(self, job_id: str) -> list[Any]:
        return self.rows("SELECT run_no, pid, started_at, ended_at FROM {p}_side WHERE job_id = :j "
                         "ORDER BY started_at", j=job_id)

    def biz(self, job_id: str) -> int:
        return int(self.scalar("SELECT count(*) FROM {p}_biz WHERE job_id = :j", j=job_id))


def enqueue(db: sa.Engine, queue: Queue, payloads: list[dict[str, Any]], kind: str = "work") -> list[str]:
    """Enqueue one job per payload in one transaction; returns their ids."""
    task_type = queue.registry.get(kind)
    with Session(db) as session, session.begin():
        jobs = queue.enqueue_many(session, [task_type(**p) for p in payloads])
        return [job.id for job in jobs]
