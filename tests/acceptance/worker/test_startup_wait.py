"""Issue 23, defect 7: ``venturi worker`` started while PostgreSQL stops or starts waits for it.

Defect 13: the wait covers the whole start-up step, not only the first
connection: a connection dropped during the schema check is retried.

The module has its own cluster (it is stopped and restarted).  A smart
shutdown held open by one idle session keeps the server refusing new
connections with "the database system is shutting down" (SQLSTATE 57P03)
for as long as the test wants; then the server is down (connection
refused), then started again.  A worker started in the middle of that
logs once that it waits, then drains the queue.  Errors that no wait can
fix (a wrong password, an unknown database) still exit at once with one
line, and the wait is bounded by ``--connect-timeout``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import psycopg2
import pytest
import sqlalchemy as sa
from sqlalchemy.orm import Session
from support.paths import APPS
from support.waiting import wait_until

import alembic_venturi
from venturi_sa import Queue, make_models
from venturi_sa.devtools.throwaway import ThrowawayCluster
from venturi_sa.storage.faults import is_unavailable

pytestmark = pytest.mark.timeout(180)
HERE = APPS
WAITING = "waiting"  # the one log line of a worker waiting for the database
PASSWORD_USER = "startup_pw"


class Started:
    """A ``venturi worker procs_app:queue`` process; its stderr lines collected by a thread."""

    def __init__(self, dsn: str, prefix: str, *args: str) -> None:
        env = {**{k: v for k, v in os.environ.items() if not k.startswith("VENTURI_")}, "PROCS_PREFIX": prefix}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "venturi_sa", "worker", "procs_app:queue", "--dsn", libpq(dsn),
             "--concurrency", "2", "--poll-interval", "0.2", "--grace", "5", *args],
            cwd=HERE, env=env, stderr=subprocess.PIPE, text=True)
        self.lines: list[str] = []
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            with self._lock:
                self.lines.append(line.rstrip("\n"))

    def log(self) -> list[str]:
        with self._lock:
            return list(self.lines)

    def finish(self, timeout: float = 60) -> list[str]:
        self.proc.wait(timeout)
        self._reader.join(10)
        return self.log()

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self._reader.join(10)
        if self.proc.stderr is not None:
            self.proc.stderr.close()


def libpq(url: str) -> str:
    return url.replace("postgresql+psycopg2://", "postgresql://", 1)


@pytest.fixture(scope="module")
def cluster() -> Iterator[ThrowawayCluster]:
    """This module's own server, with one role that needs a password (the others are trusted)."""
    with ThrowawayCluster({"fsync": "off", "synchronous_commit": "off"}) as c:
        admin = sa.create_engine(c.url, poolclass=sa.pool.NullPool)
        with admin.begin() as conn:
            conn.exec_driver_sql(f"CREATE ROLE {PASSWORD_USER} LOGIN SUPERUSER PASSWORD 'right'")
        admin.dispose()
        hba = c.data_dir / "pg_hba.conf"
        hba.write_text(f"host all {PASSWORD_USER} 127.0.0.1/32 scram-sha-256\n" + hba.read_text())
        c.pg_ctl("reload")
        yield c


@pytest.fixture
def db(cluster: ThrowawayCluster) -> Iterator[sa.Engine]:
    eng = sa.create_engine(cluster.url, pool_pre_ping=True, connect_args={"options": "-c timezone=UTC"})
    yield eng
    eng.dispose()


@pytest.fixture
def prefix(db: sa.Engine) -> str:
    name = f"su{os.getpid()}_{time.monotonic_ns() % 10**9}"
    alembic_venturi.upgrade(db, name)
    return name


def statuses(db: sa.Engine, prefix: str) -> list[str]:
    with db.connect() as conn:
        return list(conn.execute(sa.text(f"SELECT status FROM {prefix}_jobs")).scalars())


def refused_with(url: str) -> str:
    """The error a new connection gets now ('' if it connects)."""
    try:
        psycopg2.connect(libpq(url), connect_timeout=5).close()
    except psycopg2.OperationalError as exc:
        return str(exc)
    return ""


def test_a_worker_started_while_the_server_shuts_down_waits_then_drains(
        cluster: ThrowawayCluster, db: sa.Engine, prefix: str) -> None:
    queue = Queue(make_models(prefix))
    whoami = queue.task("whoami")(lambda payload, ctx: None)  # procs_app's kind, enqueued from here
    with Session(db) as session, session.begin():
        for _ in range(5):
            queue.enqueue(session, whoami())
    db.dispose()  # its idle pooled connections would hold the smart shutdown too
    holder = psycopg2.connect(libpq(cluster.url))  # keeps the smart shutdown waiting
    stopper = threading.Thread(target=cluster.pg_ctl, args=("stop", "-m", "smart", "-t", "120"), daemon=True)
    worker = None
    try:
        stopper.start()
        wait_until(lambda: "shutting down" in refused_with(cluster.url), 30, "the smart shutdown to refuse")
        worker = Started(cluster.url, prefix)
        wait_until(lambda: any(WAITING in line for line in worker.log()) or worker.proc.poll() is not None, 30,
                   "the worker to say it waits, or to exit")
        assert worker.proc.poll() is None, f"the worker exited: {worker.log()}"
        holder.close()
        stopper.join(60)
        assert not stopper.is_alive()
        cluster.pg_ctl("start")
        wait_until(lambda: statuses(db, prefix) == ["completed"] * 5, 60, "the worker to drain the queue")
        worker.proc.send_signal(signal.SIGTERM)
        lines = worker.finish()
        assert worker.proc.returncode == 0, lines
        waits = [line for line in lines if WAITING in line]
        assert len(waits) == 1, f"the wait was logged {len(waits)} times: {lines}"
        assert "shutting down" in waits[0], waits[0]
    finally:
        if not holder.closed:
            holder.close()
        stopper.join(60)
        if not (cluster.data_dir / "postmaster.pid").exists():
            cluster.pg_ctl("start")
        if worker is not None:
            worker.close()


def waiting_for(db: sa.Engine, table: str) -> int | None:
    """The pid of a backend waiting for a lock on ``table`` (None if there is none)."""
    with db.connect() as conn:
        return conn.execute(sa.text("SELECT pid FROM pg_locks WHERE relation = CAST(:t AS regclass) "
                                    "AND NOT granted ORDER BY pid LIMIT 1"), {"t": table}).scalar()


# Defect 13: the start-up wait covered only the first connection; a connection dropped during the schema
# check made `venturi worker` exit 1.
def test_a_connection_dropped_during_the_schema_check_is_retried(db: sa.Engine, prefix: str) -> None:
    queue = Queue(make_models(prefix))
    whoami = queue.task("whoami")(lambda payload, ctx: None)
    with Session(db) as session, session.begin():
        for _ in range(3):
            queue.enqueue(session, whoami())
    table = f"{prefix}_alembic_version"
    holder = db.connect()
    holder.begin()
    holder.exec_driver_sql(f"LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE")  # the schema check waits behind it
    worker = Started(db.url.render_as_string(hide_password=False), prefix)
    try:
        for attempt in range(2):  # the check, then its retry: each backend terminated while it waits
            pid = wait_until(lambda: waiting_for(db, table) or worker.proc.poll() is not None, 30,
                             f"schema check {attempt + 1} to wait for the lock, or the worker to exit")
            assert worker.proc.poll() is None, f"the worker exited: {worker.log()}"
            with db.connect() as conn:
                assert conn.execute(sa.text("SELECT pg_terminate_backend(:pid)"), {"pid": pid}).scalar()
        holder.rollback()
        wait_until(lambda: statuses(db, prefix) == ["completed"] * 3 or worker.proc.poll() is not None, 60,
                   "the worker to drain the queue, or to exit")
        assert worker.proc.poll() is None, f"the worker exited: {worker.log()}"
        worker.proc.send_signal(signal.SIGTERM)
        lines = worker.finish()
        assert worker.proc.returncode == 0, lines
        assert statuses(db, prefix) == ["completed"] * 3
        waits = [line for line in lines if WAITING in line]
        assert len(waits) == 1, f"the wait was logged {len(waits)} times: {lines}"
        assert any(words in waits[0] for words in ("closed the connection", "terminating connection")), waits[0]
    finally:
        holder.close()
        worker.close()


def test_the_wait_is_bounded_by_connect_timeout(cluster: ThrowawayCluster, db: sa.Engine, prefix: str) -> None:
    cluster.pg_ctl("stop", "-m", "fast")
    worker = Started(cluster.url, prefix, "--connect-timeout", "2")
    try:
        began = time.monotonic()
        lines = worker.finish(30)
        took = time.monotonic() - began
    finally:
        cluster.pg_ctl("start")
        worker.close()
    assert worker.proc.returncode == 1, lines
    assert 2 <= took < 20, f"exited after {took:.1f}s"
    errors = [line for line in lines if line.startswith("venturi: error: ")]
    assert len(errors) == 1 and "2s" in errors[0], lines


@pytest.mark.parametrize("what", ["wrong password", "unknown database"])
def test_wrong_credentials_or_database_exit_at_once_with_one_line(
        cluster: ThrowawayCluster, prefix: str, what: str) -> None:
    url = sa.make_url(cluster.url)
    if what == "wrong password":
        url = url.set(username=PASSWORD_USER, password="wrong")
    else:
        url = url.set(database="no_such_database")
    began = time.monotonic()
    worker = Started(url.render_as_string(hide_password=False), prefix)
    try:
        lines = worker.finish(30)
    finally:
        worker.close()
    took = time.monotonic() - began
    assert worker.proc.returncode == 1, lines
    assert len(lines) == 1 and lines[0].startswith("venturi: error: "), lines
    expected = "password authentication failed" if what == "wrong password" else "does not exist"
    assert expected in lines[0], lines
    assert took < 15, f"took {took:.1f}s: it waited"


@pytest.mark.parametrize(("message", "unavailable"), [
    ('connection to server at "db" (10.0.0.5), port 5432 failed: FATAL:  the database system is starting up', True),
    ('connection to server at "db" (10.0.0.5), port 5432 failed: FATAL:  the database system is shutting down', True),
    ('connection to server at "db" (10.0.0.5), port 5432 failed: Connection refused\n\tIs the server running?', True),
    ('connection to server on socket "/run/postgresql/.s.PGSQL.5432" failed: No such file or directory', True),
    ('connection to server at "db" (10.0.0.5), port 5432 failed: timeout expired', True),
    ("server closed the connection unexpectedly\n\tThis probably means the server terminated abnormally", True),
    ('connection to server at "db" (10.0.0.5), port 5432 failed: FATAL:  sorry, too many clients already', True),
    ('connection to server at "db" (10.0.0.5), port 5432 failed: FATAL:  password authentication failed for '
     'user "app"', False),
    ('connection to server at "db" (10.0.0.5), port 5432 failed: FATAL:  database "shop" does not exist', False),
    ('connection to server at "db" (10.0.0.5), port 5432 failed: FATAL:  role "app" does not exist', False),
    ('connection to server at "db" (10.0.0.5), port 5432 failed: FATAL:  no pg_hba.conf entry for host', False),
    ('could not translate host name "dbb" to address: Name or service not known', False),
])
def test_connection_failures_without_a_sqlstate_are_told_apart_by_libpqs_message(message: str,
                                                                                 unavailable: bool) -> None:
    """psycopg2 raises connection failures with no SQLSTATE: only the message tells a restart from a typo."""
    error = sa.exc.OperationalError("connect", {}, psycopg2.OperationalError(message))
    assert is_unavailable(error) is unavailable
