"""Helpers for the runtime-control tests: worker processes of ``control_app`` and side-table reads."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import control_app
import sqlalchemy as sa
from worker_kit import WAIT as WAIT

APP = Path(control_app.__file__).resolve()


class Procs:
    """``control_app`` worker processes; whatever is still alive at the end is killed."""

    def __init__(self, dsn: str, prefix: str) -> None:
        self.dsn, self.prefix = dsn, prefix
        self.procs: list[subprocess.Popen[str]] = []

    def start(self, listen: bool = True, lease: float = 3.0) -> subprocess.Popen[str]:
        env = {**os.environ, "VENTURI_DSN": self.dsn, "VENTURI_PREFIX": self.prefix,
               "VENTURI_LISTEN": "1" if listen else "0", "VENTURI_LEASE": str(lease)}
        proc = subprocess.Popen([sys.executable, str(APP)], env=env, stdout=subprocess.PIPE, text=True)
        self.procs.append(proc)
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("READY"), line
        return proc

    def stop(self, proc: subprocess.Popen[str]) -> int:
        proc.send_signal(signal.SIGTERM)
        return proc.wait(WAIT)

    def cleanup(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
            if proc.stdout is not None:
                proc.stdout.close()


def side(engine: sa.Engine, prefix: str, table: str, job_id: str | None = None) -> list[sa.Row[Any]]:
    """Rows of ``<prefix>_<table>`` (``side``, ``started``, ``seen``), oldest first."""
    where = "" if job_id is None else " WHERE job_id = :j"
    with engine.connect() as conn:
        return list(conn.execute(sa.text(f"SELECT job_id, run_no, at FROM {prefix}_{table}{where} ORDER BY at"),
                                 {"j": job_id}))
