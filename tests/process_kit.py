"""Worker processes of a test app: ``python APP`` with ``VENTURI_*`` settings, started until it prints READY.

An app module (``tests/acceptance/worker_app.py``, ``tests/control/control_app.py``)
reads its settings from the environment, creates its tables with ``ddl(prefix)``
and prints ``READY`` just before its worker starts.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import sqlalchemy as sa

PROCESS_WAIT = 90.0  # seconds a worker process gets to stop


class Procs:
    """Worker processes started by a test; whatever is still alive at the end is killed."""

    def __init__(self, app: Path, dsn: str, prefix: str) -> None:
        self.app, self.dsn, self.prefix = app, dsn, prefix
        self.procs: list[subprocess.Popen[str]] = []

    def start(self, **settings: Any) -> subprocess.Popen[str]:
        """Start one; ``settings`` become ``VENTURI_<NAME>`` (booleans as 1/0). Returns once it is READY."""
        env = {**os.environ, "VENTURI_DSN": self.dsn, "VENTURI_PREFIX": self.prefix,
               **{f"VENTURI_{k.upper()}": str(int(v) if isinstance(v, bool) else v) for k, v in settings.items()}}
        proc = subprocess.Popen([sys.executable, str(self.app)], env=env, stdout=subprocess.PIPE, text=True)
        self.procs.append(proc)
        assert proc.stdout is not None
        line = proc.stdout.readline()  # blocks until the worker is about to start
        assert line.startswith("READY"), line
        return proc

    def stop(self, proc: subprocess.Popen[str], sig: int = signal.SIGTERM) -> int:
        proc.send_signal(sig)
        return proc.wait(PROCESS_WAIT)

    def cleanup(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
            if proc.stdout is not None:
                proc.stdout.close()


def app_procs(app: ModuleType, engine: sa.Engine, dsn: str, prefix: str) -> Iterator[Procs]:
    """A fixture body: ``app``'s tables for ``prefix``, then its processes (killed at the end)."""
    with engine.begin() as conn:
        for statement in app.ddl(prefix):
            conn.execute(sa.text(statement))
    procs = Procs(Path(app.__file__).resolve(), dsn, prefix)  # type: ignore[arg-type]
    yield procs
    procs.cleanup()
