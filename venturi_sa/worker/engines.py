"""The engines a worker uses: a sync one for its own statements, an async one for ``ctx.session_async``.

A worker always has a **sync engine** for its own short statements (claim,
batched outcomes, lease renewal and recovery, the schema check, LISTEN) and
for ``ctx.session``.  Those run on the worker's threads, so an ``async def``
handler that blocks the event loop can never hold up lease renewal (which
would let another worker recover and re-run the job).  ``ctx.session_async``
and the outcome written in it use the **async engine**, on the worker's loop.

Given one flavour, the worker derives the other from the same URL (same
host, database and credentials), unless the caller passes it explicitly:

========================  ======================================================
given                     derived sibling
========================  ======================================================
sync ``psycopg2``         async ``psycopg_async`` if psycopg 3 is installed, else ``asyncpg``
sync ``psycopg``          async ``psycopg_async``
async ``psycopg_async``   sync ``psycopg``
async ``asyncpg``         sync ``psycopg2`` (a dependency of venturi)
========================  ======================================================

A derived engine does not inherit ``connect_args`` or pool settings (they
are driver-specific); pass ``Worker(..., async_engine=...)`` or
``Worker(..., sync_engine=...)`` to choose them.  Derived engines belong to
the worker, which disposes of them when it stops.
"""

from __future__ import annotations

import importlib.util
from typing import TYPE_CHECKING

import sqlalchemy as sa
from sqlalchemy.engine import URL

from venturi_sa.binds import is_async_engine
from venturi_sa.errors import AsyncDriverMissing, InvalidOption

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncEngine

_LIBPQ = ("psycopg2", "psycopg", "psycopg_async")  # drivers sharing libpq's URL query parameters
_MODULES = {"psycopg_async": "psycopg", "psycopg": "psycopg", "psycopg2": "psycopg2", "asyncpg": "asyncpg"}
_EXTRAS = "install an async driver: pip install 'venturi[psycopg]' (psycopg 3) or 'venturi[asyncpg]'"


def _installed(driver: str) -> bool:
    return importlib.util.find_spec(_MODULES[driver]) is not None


def _sibling_url(url: URL, driver: str, from_driver: str) -> URL:
    """``url`` on ``driver``; query parameters are kept between libpq drivers, else only ``host``."""
    sibling = url.set(drivername=f"{url.get_backend_name()}+{driver}")
    if from_driver in _LIBPQ and driver in _LIBPQ:
        return sibling
    return sibling.set(query={k: v for k, v in url.query.items() if k == "host"})


def async_sibling_url(engine: sa.Engine) -> URL:
    """The async-driver URL of a sync engine's database; ``AsyncDriverMissing`` if no driver is installed."""
    driver = engine.dialect.driver
    candidates = ["psycopg_async"] if driver == "psycopg" else ["psycopg_async", "asyncpg"]
    for candidate in candidates:
        if _installed(candidate):
            return _sibling_url(engine.url, candidate, driver)
    raise AsyncDriverMissing(f"ctx.session_async needs an async driver for {engine.url.get_backend_name()} "
                             f"(the worker's engine uses {driver!r}): {_EXTRAS}")


def sync_sibling_url(engine: AsyncEngine) -> URL:
    """The sync-driver URL of an async engine's database (psycopg for psycopg_async, else psycopg2)."""
    driver = engine.dialect.driver  # "psycopg" for postgresql+psycopg_async
    return _sibling_url(engine.url, "psycopg" if driver in ("psycopg", "psycopg_async") else "psycopg2", driver)


class WorkerEngines:
    """The worker's sync engine (given or derived) and its async engine (given, or derived on first use)."""

    def __init__(self, engine: sa.Engine | AsyncEngine, *, sync_engine: sa.Engine | None,
                 async_engine: AsyncEngine | None, pool_size: int) -> None:
        self.pool_size = pool_size
        self._derived: list[sa.Engine | AsyncEngine] = []
        if is_async_engine(engine):
            if async_engine is not None:
                raise InvalidOption("Worker got an AsyncEngine and async_engine=; pass sync_engine= instead")
            self.async_engine: AsyncEngine | None = engine
            self.sync = sync_engine if sync_engine is not None else self._derive_sync(engine)
        else:
            assert isinstance(engine, sa.Engine)  # require_worker_engine() refused anything else
            if sync_engine is not None:
                raise InvalidOption("Worker got a sync Engine and sync_engine=; pass async_engine= instead")
            if engine.dialect.is_async:
                raise TypeError(f"Worker() got a sync Engine on the async driver {engine.dialect.driver!r}: "
                                "create it with create_async_engine() (the worker then derives a sync "
                                "sibling for its own statements)")
            self.sync = engine
            self.async_engine = async_engine
        if not isinstance(self.sync, sa.Engine) or self.sync.dialect.is_async:
            raise TypeError("Worker(sync_engine=...) takes a sync Engine on a sync driver")
        if self.async_engine is not None and not is_async_engine(self.async_engine):
            raise TypeError("Worker(async_engine=...) takes an AsyncEngine")

    def _derive_sync(self, engine: AsyncEngine) -> sa.Engine:
        derived = sa.create_engine(sync_sibling_url(engine), pool_size=self.pool_size,
                                   max_overflow=self.pool_size, pool_pre_ping=True)
        self._derived.append(derived)
        return derived

    def get_async(self) -> AsyncEngine:
        """The async engine, derived from the sync engine's URL on first use."""
        if self.async_engine is None:
            from sqlalchemy.ext.asyncio import create_async_engine  # needs greenlet: only for async runs

            self.async_engine = create_async_engine(async_sibling_url(self.sync), pool_size=self.pool_size,
                                                    max_overflow=self.pool_size, pool_pre_ping=True)
            self._derived.append(self.async_engine)
        return self.async_engine

    def derived(self) -> list[sa.Engine | AsyncEngine]:
        """The engines the worker created (and so disposes of)."""
        return list(self._derived)
