"""The drivers the suites run on, the stacks of the conformance matrix, and the test cluster through each.

A :class:`Stack` is how an application reaches PostgreSQL: SQLAlchemy's sync
API (``Engine``/``Session``) or its async one (``AsyncEngine``/``AsyncSession``)
on one driver.  Four of the six are supported; the other two are refused
when the engine or worker is built, and the conformance suite asserts it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Coroutine
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import sqlalchemy as sa

from venturi_sa.storage.params import Runner

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncEngine

T = TypeVar("T")
SYNC_DRIVERS = ("psycopg2", "psycopg")
UTC = {"options": "-c timezone=UTC"}  # libpq drivers; asyncpg takes server_settings
OpenRunner = Callable[[], AbstractContextManager[Runner]]
"""Opens a runner (a Session or a Connection) in its own transaction (the conformance ``runner`` fixture)."""


def driver_url(pg_url: str, driver: str) -> str:
    """``pg_url`` with its drivername set to ``postgresql+<driver>``."""
    url = sa.make_url(pg_url).set(drivername=f"postgresql+{driver}")
    return url.render_as_string(hide_password=False)


def driver_engine(pg_url: str, driver: str, **kwargs: Any) -> sa.Engine:
    """An engine on ``driver`` with the settings every test uses (UTC sessions, a roomy pool)."""
    kwargs.setdefault("pool_size", 20)
    kwargs.setdefault("max_overflow", 40)
    engine = sa.create_engine(driver_url(pg_url, driver), connect_args=dict(UTC), **kwargs)
    assert engine.dialect.driver == driver, engine.dialect.driver
    return engine


def async_driver_engine(pg_url: str, driver: str, **kwargs: Any) -> AsyncEngine:
    """An AsyncEngine on ``driver`` (``asyncpg`` or ``psycopg_async``), UTC sessions, a roomy pool.

    Its pooled connections belong to the loop that opened them: use it on
    the worker loop only (:func:`on_loop`).
    """
    from sqlalchemy.ext.asyncio import create_async_engine

    kwargs.setdefault("pool_size", 20)
    kwargs.setdefault("max_overflow", 40)
    connect_args = {"server_settings": {"timezone": "UTC"}} if driver == "asyncpg" else dict(UTC)
    return create_async_engine(driver_url(pg_url, driver), connect_args=connect_args, **kwargs)


def on_loop(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` on venturi's worker loop (where the async engines of :class:`Engines` live)."""
    from venturi_sa.worker.loop import worker_loop

    return worker_loop().run(coro)


@dataclass(frozen=True)
class Stack:
    """SQLAlchemy's ``sync`` or ``async`` API on one driver (``psycopg2``, ``psycopg``, ``asyncpg``)."""

    flavour: str
    driver: str

    @property
    def id(self) -> str:
        return f"{self.flavour}-{self.driver}"

    @property
    def is_async(self) -> bool:
        return self.flavour == "async"

    @property
    def dialect(self) -> str:
        """SQLAlchemy's driver name: ``postgresql+<dialect>://``."""
        return "psycopg_async" if (self.is_async and self.driver == "psycopg") else self.driver

    @property
    def supported(self) -> bool:
        """psycopg2 has no async API, asyncpg no sync one."""
        return (self.flavour, self.driver) not in (("sync", "asyncpg"), ("async", "psycopg2"))

    @property
    def sync_driver(self) -> str:
        """The sync driver the test itself reads and seeds through (the same library where it can)."""
        return "psycopg" if self.driver == "psycopg" else "psycopg2"


STACKS = tuple(Stack(f, d) for f in ("sync", "async") for d in ("psycopg2", "psycopg", "asyncpg"))
SUPPORTED = tuple(s for s in STACKS if s.supported)
UNSUPPORTED = tuple(s for s in STACKS if not s.supported)

# CI's version cells (tox.ini) set VENTURI_DRIVER_MATRIX=lean: they vary Python, SQLAlchemy and PostgreSQL,
# not drivers.  There the conformance suite's verb tests run through psycopg2 only and its per-stack tests on
# one stack per dialect (sync psycopg2, async psycopg, async asyncpg); the main cell runs every combination.
_MATRIX = os.environ.get("VENTURI_DRIVER_MATRIX", "full")
if _MATRIX not in ("full", "lean"):
    raise RuntimeError(f"VENTURI_DRIVER_MATRIX must be 'full' or 'lean', not {_MATRIX!r}")
LEAN = _MATRIX == "lean"
CONFORMANCE_SYNC_DRIVERS = ("psycopg2",) if LEAN else SYNC_DRIVERS
CONFORMANCE_STACKS = tuple(s for s in SUPPORTED if not (LEAN and s.id == "sync-psycopg"))


class Engines:
    """One engine per (flavour, driver), made on first use, shared by a whole test session."""

    def __init__(self, pg_url: str) -> None:
        self.pg_url = pg_url
        self._made: dict[tuple[bool, str], Any] = {}

    def sync(self, driver: str) -> sa.Engine:
        key = (False, driver)
        if key not in self._made:
            self._made[key] = driver_engine(self.pg_url, driver)
        engine: sa.Engine = self._made[key]
        return engine

    def of(self, stack: Stack) -> sa.Engine | AsyncEngine:
        """The engine ``stack`` gives a Worker or a session (an AsyncEngine for ``async``)."""
        if not stack.is_async:
            return self.sync(stack.dialect)
        key = (True, stack.dialect)
        if key not in self._made:
            self._made[key] = async_driver_engine(self.pg_url, stack.dialect)
        return self._made[key]  # type: ignore[no-any-return]

    def dispose(self) -> None:
        for (is_async, _), engine in self._made.items():
            if is_async:
                on_loop(engine.dispose())
            else:
                engine.dispose()
        self._made.clear()
