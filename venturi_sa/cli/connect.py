"""Reaching the queue's database: DSN normalization, engines, the schema check.

Engines made here use the psycopg2 driver, ``pool_pre_ping=True`` and a pool
of at least ``concurrency + 4`` connections; sessions run in UTC.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import sqlalchemy as sa
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError, OperationalError

import alembic_venturi
from venturi_sa.cli.failures import CliError, first_line
from venturi_sa.models import make_models
from venturi_sa.queue import Queue

NO_DSN = "no database given: pass --dsn postgresql://user:password@host/dbname or set VENTURI_DSN"
DRIVERS = {"postgres", "postgresql", "postgresql+psycopg2"}
CONNECT_TIMEOUT = 10


def normalize_dsn(dsn: str | None) -> URL:
    """``dsn`` as a SQLAlchemy URL on the psycopg2 driver (``postgres://`` and ``postgresql://`` accepted)."""
    if not dsn or not dsn.strip():
        raise CliError(NO_DSN)
    try:
        url = make_url(dsn.strip())
    except ArgumentError:
        raise CliError(
            f"invalid DSN {redact(dsn)!r}: expected a URL like postgresql://user:password@host:5432/dbname"
        ) from None
    if url.drivername not in DRIVERS:
        raise CliError(
            f"unsupported database {url.drivername!r} in the DSN: venturi needs PostgreSQL "
            "(postgresql://...)"
        )
    return url.set(drivername="postgresql+psycopg2")


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
                            connect_args=connect_args)


def check_schema(engine: sa.Engine, prefix: str) -> None:
    """Raise a one-line :class:`CliError` unless queue ``prefix`` is reachable and at HEAD."""
    try:
        alembic_venturi.check_current(engine, prefix)
    except OperationalError as exc:
        raise CliError(f"cannot connect to {shown(engine.url)}: {first_line(exc)}") from None


def ping(engine: sa.Engine) -> None:
    """Raise a one-line :class:`CliError` if the database cannot be reached."""
    try:
        with engine.connect() as connection:
            connection.execute(sa.select(1))
    except OperationalError as exc:
        raise CliError(f"cannot connect to {shown(engine.url)}: {first_line(exc)}") from None


@contextmanager
def opened(dsn: str | None, prefix: str | None = None, *, concurrency: int = 1) -> Iterator[sa.Engine]:
    """An engine for ``dsn``, disposed on exit; checked to be at HEAD for ``prefix`` if given."""
    engine = make_engine(normalize_dsn(dsn), concurrency)
    try:
        if prefix is None:
            ping(engine)
        else:
            check_schema(engine, prefix)
        yield engine
    finally:
        engine.dispose()


def bare_queue(prefix: str) -> Queue:
    """A queue with no task types: enough for stats, history, admin actions and cleanup."""
    return Queue(make_models(prefix), [])
