"""A real PgBouncer in transaction pool mode in front of the test cluster.

The binary is Debian's ``pgbouncer`` package; when it is missing and we are
root, :func:`pgbouncer_binary` installs it (``apt-get update`` once, then
``apt-get install -y pgbouncer``).  Like the throwaway PostgreSQL, PgBouncer
refuses to run as root, so it then runs as an unprivileged user.  It listens
on 127.0.0.1 on a free port, trusts every client (the cluster does too) and
ignores the ``options`` startup parameter (PgBouncer 1.18 refuses it; the
engines made here do not send it anyway).
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import Any
from uuid import uuid4

import sqlalchemy as sa

BINARIES = ("/usr/sbin/pgbouncer", "/usr/bin/pgbouncer")
UNPRIVILEGED = ("postgres", "nobody")
INSTALL_TIMEOUT = 600


def _found() -> str | None:
    for path in (shutil.which("pgbouncer"), *BINARIES):
        if path and os.access(path, os.X_OK):
            return path
    return None


def pgbouncer_binary() -> str:
    """The pgbouncer executable, installed from Debian's packages if missing; raises RuntimeError."""
    found = _found()
    if found:
        return found
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        raise RuntimeError("pgbouncer is not installed (apt-get install pgbouncer) and we cannot install it")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for args in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", "pgbouncer"]):
        done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=INSTALL_TIMEOUT, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(args)} failed: {done.stderr.strip()[-500:]}")
    found = _found()
    if not found:
        raise RuntimeError("apt-get installed pgbouncer, but no pgbouncer binary was found")
    return found


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _user() -> str | None:
    if os.geteuid() != 0:
        return None
    for name in UNPRIVILEGED:
        try:
            pwd.getpwnam(name)
            return name
        except KeyError:
            continue
    raise RuntimeError("running as root and no unprivileged user (postgres, nobody) exists")


# What each driver needs behind PgBouncer in transaction mode (docs/drivers.md says why).
CONNECT_ARGS: dict[str, dict[str, Any]] = {
    "psycopg2": {},
    "psycopg": {"prepare_threshold": None},
    "asyncpg": {"statement_cache_size": 0, "prepared_statement_cache_size": 0,
                "prepared_statement_name_func": lambda: f"__asyncpg_{uuid4()}__"},
}


class PgBouncer:
    """PgBouncer (``pool_mode = transaction``) forwarding every database to the cluster at ``pg_url``."""

    def __init__(self, pg_url: str, pool_size: int = 20) -> None:
        self.binary = pgbouncer_binary()
        self.target = sa.make_url(pg_url)
        self.port = _free_port()
        self.pool_size = pool_size
        self.user = _user()
        self.root = Path(tempfile.mkdtemp(prefix="venturi-pgbouncer-"))
        self.proc: subprocess.Popen[str] | None = None

    def url(self, driver: str) -> str:
        """The target database through PgBouncer, on ``postgresql+<driver>``."""
        url = self.target.set(drivername=f"postgresql+{driver}", host="127.0.0.1", port=self.port)
        return url.render_as_string(hide_password=False)

    def engine(self, driver: str, **kwargs: Any) -> sa.Engine:
        """A sync engine through PgBouncer with the driver's transaction-pooling settings."""
        kwargs.setdefault("pool_size", 10)
        kwargs.setdefault("max_overflow", 20)
        return sa.create_engine(self.url(driver), connect_args=dict(CONNECT_ARGS[driver]), **kwargs)

    def _config(self) -> Path:
        users = self.root / "userlist.txt"
        users.write_text(f'"{self.target.username or "postgres"}" ""\n')
        ini = self.root / "pgbouncer.ini"
        ini.write_text("\n".join([
            "[databases]",
            f"* = host={self.target.host or '127.0.0.1'} port={self.target.port or 5432}",
            "[pgbouncer]",
            "listen_addr = 127.0.0.1",
            f"listen_port = {self.port}",
            "unix_socket_dir =",
            "auth_type = trust",
            f"auth_file = {users}",
            "pool_mode = transaction",
            "max_client_conn = 500",
            f"default_pool_size = {self.pool_size}",
            "ignore_startup_parameters = extra_float_digits, options",
            f"logfile = {self.root / 'pgbouncer.log'}",
            "",
        ]))
        if self.user is not None:
            for path in (self.root, users, ini):
                shutil.chown(path, user=self.user)
        return ini

    def start(self) -> PgBouncer:
        self.proc = subprocess.Popen([self.binary, str(self._config())], user=self.user, cwd=self.root,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"pgbouncer exited {self.proc.returncode}: {self.log()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return self
            except OSError:
                time.sleep(0.05)  # waiting for a process to open its port: nothing to wait on but time
        raise RuntimeError(f"pgbouncer did not listen on port {self.port} within 30 s: {self.log()}")

    def log(self) -> str:
        path = self.root / "pgbouncer.log"
        return path.read_text()[-2000:] if path.exists() else ""

    def stop(self) -> None:
        try:
            if self.proc is not None and self.proc.poll() is None:
                self.proc.terminate()
                try:
                    self.proc.communicate(timeout=10)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.communicate()
        finally:
            shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> PgBouncer:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
