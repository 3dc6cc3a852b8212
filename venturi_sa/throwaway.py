"""A throwaway local PostgreSQL cluster, for the quick start, tests and benchmarks.

The cluster lives in a temporary directory, listens on 127.0.0.1 on a free
port with ``trust`` authentication, and is removed by :meth:`stop`.  When the
current process is root (``initdb`` and ``postgres`` refuse to run as root),
the server runs as an unprivileged system user instead.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType

from venturi_sa.errors import VenturiError

UNPRIVILEGED_USERS = ("postgres", "nobody")


class NoPostgres(VenturiError):
    """No PostgreSQL server binaries were found on this machine."""


def find_bin_dir() -> Path:
    """Locate PostgreSQL's server binaries (``initdb``, ``pg_ctl``).

    Looks at ``$VENTURI_PG_BIN``, then ``/usr/lib/postgresql/<ver>/bin``
    (newest first), then ``$PATH``.
    """
    candidates: list[str] = []
    if os.environ.get("VENTURI_PG_BIN"):
        candidates.append(os.environ["VENTURI_PG_BIN"])
    versions = glob.glob("/usr/lib/postgresql/*/bin")
    candidates += sorted(versions, key=lambda p: int(Path(p).parent.name), reverse=True)
    on_path = shutil.which("initdb")
    if on_path:
        candidates.append(str(Path(on_path).parent))
    for candidate in candidates:
        if (Path(candidate) / "initdb").exists() and (Path(candidate) / "pg_ctl").exists():
            return Path(candidate)
    raise NoPostgres(
        "no PostgreSQL server binaries found (looked in $VENTURI_PG_BIN, "
        "/usr/lib/postgresql/*/bin and $PATH); install them, e.g. "
        "'apt-get install postgresql', or pass --dsn to use an existing database"
    )


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _server_user() -> str | None:
    """The user to run the server as, or None to run as ourselves."""
    if os.geteuid() != 0:
        return None
    for name in UNPRIVILEGED_USERS:
        try:
            pwd.getpwnam(name)
        except KeyError:
            continue
        return name
    raise NoPostgres("running as root and no unprivileged user (postgres, nobody) exists")


class ThrowawayCluster:
    """A PostgreSQL cluster in a temporary directory; use as a context manager.

    ``settings`` are extra ``postgres -c`` options (e.g. ``{"fsync": "off"}``).
    """

    def __init__(self, settings: Mapping[str, str] | None = None, port: int | None = None) -> None:
        self.bin_dir = find_bin_dir()
        self.port = port or _free_port()
        self.settings = dict(settings or {})
        self.user = _server_user()
        self.root = Path(tempfile.mkdtemp(prefix="venturi-pg-"))
        self.data_dir = self.root / "data"
        self.log_file = self.root / "server.log"

    @property
    def url(self) -> str:
        """SQLAlchemy URL of the cluster's ``postgres`` database."""
        return f"postgresql+psycopg2://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, *args: str) -> None:
        result = subprocess.run(
            [str(self.bin_dir / args[0]), *args[1:]],
            user=self.user,
            capture_output=True,
            text=True,
            cwd=self.root,
            check=False,
        )
        if result.returncode != 0:
            raise VenturiError(
                f"{args[0]} failed ({result.returncode}): {result.stderr.strip() or result.stdout.strip()}"
            )

    def _options(self) -> str:
        opts = {
            "listen_addresses": "127.0.0.1",
            "port": str(self.port),
            "unix_socket_directories": str(self.root),
            "max_connections": "200",
            **self.settings,
        }
        return " ".join(f"-c {key}={value}" for key, value in opts.items())

    def start(self) -> ThrowawayCluster:
        """Create the cluster on first call, then start the server and wait for it."""
        if self.user is not None:
            shutil.chown(self.root, user=self.user)
        if not self.data_dir.exists():
            self._run(
                "initdb", "-D", str(self.data_dir), "-U", "postgres", "-A", "trust",
                "-E", "UTF8", "--locale=C", "--no-sync",
            )
        self._run(
            "pg_ctl", "start", "-w", "-t", "60", "-D", str(self.data_dir),
            "-l", str(self.log_file), "-o", self._options(),
        )
        return self

    def pg_ctl(self, *args: str) -> None:
        """Run ``pg_ctl <args>`` against this cluster (e.g. ``"restart", "-m", "fast"``)."""
        extra = ["-o", self._options()] if args and args[0] in ("start", "restart") else []
        self._run("pg_ctl", *args, "-w", "-D", str(self.data_dir), "-l", str(self.log_file), *extra)

    def stop(self) -> None:
        """Stop the server (fast shutdown) and delete the cluster's files."""
        try:
            if (self.data_dir / "postmaster.pid").exists():
                self._run("pg_ctl", "stop", "-w", "-m", "fast", "-D", str(self.data_dir))
        finally:
            shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> ThrowawayCluster:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
