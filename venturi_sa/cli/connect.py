"""Reaching the queue's database: DSN normalization, engines, the schema check.

The CLI accepts every PostgreSQL URL SQLAlchemy knows a supported driver for
(``postgresql://``, ``postgres://``, ``+psycopg2``, ``+psycopg``,
``+asyncpg``, ``+psycopg_async``) and runs on a sync driver: an async URL
is mapped to its sync sibling (asyncpg: psycopg if installed, else
psycopg2; psycopg_async: psycopg), and a URL naming no driver uses psycopg2
if installed, else psycopg.  Engines made here use ``pool_pre_ping=True``
and a pool of at least ``concurrency + 4`` connections; sessions run in UTC.
SQL parameters (jobs' payloads, carries and results) are kept out of logs
and error messages: engines made here hide them, and
:class:`HiddenSqlParameters` drops them from the statement log of any
engine (an application's own) when ``-vv`` turns that log on.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

import click
import sqlalchemy as sa
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError, OperationalError

import alembic_venturi
from venturi_sa.cli.failures import QUERY_TIMEOUT_META, CliError, busy, first_line
from venturi_sa.cli.options import APP_META, DEFAULTED_META
from venturi_sa.errors import SchemaNotMigrated
from venturi_sa.models import make_models
from venturi_sa.queue import Queue
from venturi_sa.storage.backend import ping as ping_database
from venturi_sa.storage.catalog import queue_prefixes
from venturi_sa.storage.drivers import DEFAULT_SYNC, DRIVERS, Driver
from venturi_sa.storage.query_timeouts import DEFAULT_SECONDS, bounded, is_busy

NO_DSN = "no database given: pass --dsn postgresql://user:password@host/dbname or set VENTURI_DSN"
BACKENDS = {"postgres", "postgresql"}
CONNECT_TIMEOUT = 10
SHOWN_QUEUES = 10  # queue prefixes named in the "no such queue" error
# Query keys of SQLAlchemy's asyncpg dialect that libpq (the sync drivers) does not know.
ASYNCPG_ONLY = ("prepared_statement_cache_size", "statement_cache_size", "prepared_statement_name_func")


def normalize_dsn(dsn: str | None) -> URL:
    """``dsn`` as a SQLAlchemy URL on an installed sync driver (see the module docstring).

    Raises a one-line :class:`CliError` for a database other than PostgreSQL,
    a driver venturi does not support, or a driver that is not installed
    (naming the extra that installs it).
    """
    if not dsn or not dsn.strip():
        raise CliError(NO_DSN)
    try:
        url = make_url(dsn.strip())
    except ArgumentError:
        raise CliError(
            f"invalid DSN {redact(dsn)!r}: expected a URL like postgresql://user:password@host:5432/dbname"
        ) from None
    backend, _, driver = url.drivername.partition("+")
    if backend not in BACKENDS:
        raise CliError(
            f"unsupported database {backend!r} in the DSN: venturi needs PostgreSQL (postgresql://...)"
        )
    if driver and driver not in DRIVERS:
        raise CliError(f"driver {driver} is not supported; use psycopg2, psycopg or asyncpg")
    chosen = _sync_driver(DRIVERS[driver] if driver else None)
    if driver and DRIVERS[driver].is_async:
        url = _as_libpq(url)
    return url.set(drivername=f"postgresql+{chosen.name}")


def _sync_driver(asked: Driver | None) -> Driver:
    """The installed sync driver the CLI runs ``asked`` on (None: a URL naming no driver)."""
    if asked is not None and not asked.is_async:
        if not asked.installed:
            raise CliError(f"driver {asked.name} is not installed: pip install 'venturi[{asked.extra}]'")
        return asked
    candidates = [DRIVERS[name] for name in (asked.sync_siblings if asked else DEFAULT_SYNC)]
    for candidate in candidates:
        if candidate.installed:
            return candidate
    what = f"the {asked.name} URL" if asked else "a postgresql:// URL"
    extras = " or ".join(f"'venturi[{c.extra}]'" for c in candidates)
    names = " or ".join(c.name for c in candidates)
    raise CliError(f"the CLI runs {what} on a sync driver ({names}), and none is installed: pip install {extras}")


def _as_libpq(url: URL) -> URL:
    """An async URL's query in libpq terms: asyncpg's ``ssl`` is ``sslmode``; its cache knobs go."""
    query = {k: v for k, v in url.query.items() if k not in ASYNCPG_ONLY}
    if "ssl" in query and "sslmode" not in query:
        query["sslmode"] = query.pop("ssl")
    return url.set(query=query)


def redact(dsn: str) -> str:
    """``dsn`` with any password hidden, for messages."""
    try:
        return make_url(dsn).render_as_string(hide_password=True)
    except ArgumentError:
        return "<unparseable DSN>"


def shown(url: URL) -> str:
    return url.render_as_string(hide_password=True)


def make_engine(url: URL, concurrency: int = 1) -> sa.Engine:
    """An engine for the CLI: pre-ping, a pool of ``concurrency + 4``, UTC sessions, 10 s connect timeout."""
    connect_args: dict[str, object] = {}
    if "options" not in url.query:
        connect_args["options"] = "-c timezone=UTC"
    if "connect_timeout" not in url.query:
        connect_args["connect_timeout"] = CONNECT_TIMEOUT
    size = concurrency + 4
    return sa.create_engine(url, pool_size=size, max_overflow=size, pool_pre_ping=True,
                            connect_args=connect_args, hide_parameters=True)


class HiddenSqlParameters(logging.Filter):
    """A handler filter: SQLAlchemy's logged SQL parameters become ``[SQL parameters hidden]``.

    They carry jobs' payloads, carries and results; the statements stay.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        if (record.name.startswith("sqlalchemy.engine") and record.msg == "[%s] %r"
                and isinstance(record.args, tuple) and len(record.args) == 2):
            record.msg, record.args = "[%s] [SQL parameters hidden]", record.args[:1]
        return True


def check_schema(engine: sa.Engine, prefix: str) -> None:
    """Raise a one-line :class:`CliError` unless queue ``prefix`` is reachable and at HEAD."""
    try:
        require_schema(engine, prefix)
    except OperationalError as exc:
        if is_busy(exc):
            raise busy(query_timeout()) from None
        raise CliError(f"cannot connect to {shown(engine.url)}: {first_line(exc)}") from None


def require_schema(engine: sa.Engine, prefix: str) -> None:
    """Return if queue ``prefix`` is at HEAD; database errors are raised as they are (read-only).

    ``SchemaNotMigrated`` if it is not; a one-line :class:`CliError` naming
    the queues of the database when the prefix was defaulted and names none.
    """
    try:
        alembic_venturi.check_current(engine, prefix)
    except SchemaNotMigrated:
        ctx = click.get_current_context(silent=True)
        if ctx is None or not ctx.meta.get(DEFAULTED_META) or _exists(engine, prefix):
            raise
        with engine.connect() as conn:
            found = queue_prefixes(conn)
        more = f" and {len(found) - SHOWN_QUEUES} more" if len(found) > SHOWN_QUEUES else ""
        there = (f"queues in this database: {', '.join(found[:SHOWN_QUEUES])}{more}" if found
                 else "this database has no venturi queue yet")
        raise CliError(f"no queue {prefix!r} here (the default prefix; none was given): name yours with "
                       f"--prefix, VENTURI_PREFIX or --app ({there})") from None


def _exists(engine: sa.Engine, prefix: str) -> bool:
    """True if queue ``prefix`` has tables (so a not-at-head error is about its version, not its name)."""
    with engine.connect() as conn:
        return prefix in queue_prefixes(conn)


def ping(engine: sa.Engine) -> None:
    """Raise a one-line :class:`CliError` if the database cannot be reached."""
    try:
        with engine.connect() as connection:
            ping_database(connection)
    except OperationalError as exc:
        raise CliError(f"cannot connect to {shown(engine.url)}: {first_line(exc)}") from None


def query_timeout() -> float | None:
    """The ``--query-timeout`` of this run (``VENTURI_QUERY_TIMEOUT``; default 5 s; 0: none)."""
    ctx = click.get_current_context(silent=True)
    found = ctx.meta.get(QUERY_TIMEOUT_META, DEFAULT_SECONDS) if ctx is not None else DEFAULT_SECONDS
    return float(found) or None


@contextmanager
def opened(dsn: str | None, prefix: str | None = None, *, concurrency: int = 1,
           bound: bool = True) -> Iterator[sa.Engine]:
    """An engine for ``dsn``, disposed on exit; checked to be at HEAD for ``prefix`` if given.

    With ``bound`` (reads and one-job actions), every transaction on it waits
    at most ``--query-timeout`` seconds for a lock or a statement
    (:func:`venturi_sa.storage.query_timeouts.bounded`); a statement cancelled
    so is rolled back and the command prints "the database is busy: ..." and
    exits 1.
    """
    raw = make_engine(normalize_dsn(dsn), concurrency)
    engine = bounded(raw, query_timeout()) if bound else raw
    try:
        if prefix is None:
            ping(engine)
        else:
            check_schema(engine, prefix)
        yield engine
    finally:
        raw.dispose()


def bare_queue(prefix: str) -> Queue:
    """A queue with no task types: enough for stats, history, admin actions and cleanup."""
    return Queue(make_models(prefix), [])


def app_queue(prefix: str) -> Queue:
    """``--app``'s queue (its task code known: declared limits, debounce) when it is queue ``prefix``, else
    :func:`bare_queue`; ``flask venturi`` gives the app's queue the same way."""
    ctx = click.get_current_context(silent=True)
    app = ctx.meta.get(APP_META) if ctx is not None else None
    return app.queue if app is not None and app.queue.prefix == prefix else bare_queue(prefix)
