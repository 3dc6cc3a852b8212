"""Worker processes of a test app: ``python APP`` with ``VENTURI_*`` settings, started until it prints READY.

An app module (``tests/support/apps/worker_app.py``, ``tests/support/apps/control_app.py``,
``tests/support/apps/periodic_app.py``) reads its settings from the environment,
may create its tables with ``ddl(prefix)``, and runs its worker with
:func:`serve_worker`, which prints ``READY`` just before the worker starts.
The test side starts and stops the processes with :class:`Procs`.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

import sqlalchemy as sa

from venturi_sa import Worker

PROCESS_WAIT = 90.0  # seconds a worker process gets to stop


def serve_worker(build: Callable[[Mapping[str, str], sa.Engine], Worker], *, pool_size: int = 8,
                 application_name: str | None = None, **engine_options: Any) -> Worker:
    """An app's ``main()``: engine, worker, ``READY <pid>``, run, ``EXIT <pid> <processed>``.

    The engine is on ``VENTURI_DSN`` with the session time zone UTC;
    ``build(os.environ, engine)`` makes the worker.  It runs ``worker.run()``
    until SIGTERM/SIGINT (``VENTURI_MODE=idle``: ``run_until_idle()``).  The
    engine is disposed on the way out; the stopped worker is returned.
    """
    env = os.environ
    connect_args = {"options": "-c timezone=UTC"}
    if application_name is not None:
        connect_args["application_name"] = application_name
    engine = sa.create_engine(env["VENTURI_DSN"], pool_size=pool_size, connect_args=connect_args, **engine_options)
    try:
        worker = build(env, engine)
        print(f"READY {os.getpid()}", flush=True)
        if env.get("VENTURI_MODE", "run") == "idle":
            worker.run_until_idle()
        else:
            worker.run()
        print(f"EXIT {os.getpid()} {worker.processed}", flush=True)
        return worker
    finally:
        engine.dispose()


class Procs:
    """Worker processes started by a test; whatever is still alive at the end is killed."""

    def __init__(self, app: Path, dsn: str, prefix: str) -> None:
        self.app, self.dsn, self.prefix = app, dsn, prefix
        self.procs: list[subprocess.Popen[str]] = []

    def spawn(self, **settings: Any) -> subprocess.Popen[str]:
        """Start one without waiting; ``settings`` become ``VENTURI_<NAME>`` (booleans as 1/0)."""
        env = {**os.environ, "VENTURI_DSN": self.dsn, "VENTURI_PREFIX": self.prefix,
               **{f"VENTURI_{k.upper()}": str(int(v) if isinstance(v, bool) else v) for k, v in settings.items()}}
        proc = subprocess.Popen([sys.executable, str(self.app)], env=env, stdout=subprocess.PIPE, text=True)
        self.procs.append(proc)
        return proc

    @staticmethod
    def ready(proc: subprocess.Popen[str]) -> subprocess.Popen[str]:
        """Wait until ``proc`` prints READY (its worker is about to start)."""
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("READY"), line
        return proc

    def start(self, **settings: Any) -> subprocess.Popen[str]:
        """:meth:`spawn` one, then wait until it is READY."""
        return self.ready(self.spawn(**settings))

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


STARTED = re.compile(r"worker process (\d+) started \(pid (\d+)\)")


class Supervised:
    """A supervisor process (``venturi worker --processes N`` or an app's own); its stderr lines and the
    child pids they announce, per index; every condition waited for gets ``wait`` seconds."""

    def __init__(self, args: list[str], env: dict[str, str], cwd: Path, wait: float = 45.0) -> None:
        self.proc = subprocess.Popen(args, cwd=cwd, env=env, stderr=subprocess.PIPE, text=True)
        self.wait = wait
        self.lines: list[str] = []
        self.children: dict[int, list[int]] = {}
        self._changed = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            with self._changed:
                self.lines.append(line)
                found = STARTED.search(line)
                if found:
                    self.children.setdefault(int(found.group(1)), []).append(int(found.group(2)))
                self._changed.notify_all()
        with self._changed:
            self._changed.notify_all()

    def wait_for(self, what: str, predicate: Callable[[], object]) -> None:
        with self._changed:
            assert self._changed.wait_for(predicate, self.wait), f"{what}; log:\n{self.log()}"

    def log(self) -> str:
        with self._changed:
            return "".join(self.lines)

    def pid_of(self, index: int) -> int:
        return self.children[index][-1]

    def all_pids(self) -> list[int]:
        with self._changed:
            return [pid for pids in self.children.values() for pid in pids]

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        for pid in self.all_pids():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self._reader.join(10)
        if self.proc.stderr is not None:
            self.proc.stderr.close()
