"""The engines a worker uses, and the connection runner its own statements go through.

The worker's own short statements (claim, batched outcomes, lease renewal
and recovery, the schema check) go through a :class:`Connections` runner:
``begin(fn)`` runs ``fn(connection)`` in a committed transaction and
``connect(fn)`` without one.  The storage verbs take a sync ``Connection``,
so the SQL is written once for both flavours:

* a sync ``Engine``: :class:`SyncConnections`, ``with engine.begin() as conn: fn(conn)``
  on the calling thread (psycopg2 or psycopg 3);
* an ``AsyncEngine``: :class:`AsyncConnections`, the same ``with engine.begin()``
  on the async engine's ``sync_engine``, run as one greenlet on the worker's
  event loop (:mod:`~venturi_sa.worker.loop`), through the async driver
  (asyncpg or psycopg 3 async), while the calling thread waits.

The claim loop and the outcome batch writer each run a transaction every few
milliseconds; each gets a :class:`HeldConnections` instead
(:meth:`WorkerEngines.held`): one connection kept between its transactions,
since a pool checkout with the worker's ``isolation_level`` (set at checkout,
reset at checkin) cost about twice the CPU of a one-statement transaction.

``ctx.session`` is a sync ``Session`` and ``ctx.session_async`` an
``AsyncSession``; whichever flavour the worker was not given is derived on
first use from the same URL (same host, database and credentials), unless
the caller passes it explicitly:

========================  ======================================================
given                     derived sibling
========================  ======================================================
sync ``psycopg2``         async ``psycopg_async`` if psycopg 3 is installed, else ``asyncpg``
sync ``psycopg``          async ``psycopg_async``
async ``psycopg_async``   sync ``psycopg`` (for ``ctx.session`` only)
async ``asyncpg``         sync ``psycopg2`` if installed, else ``psycopg`` (for ``ctx.session`` only)
========================  ======================================================

A derived engine does not inherit ``connect_args`` or pool settings (they
are driver-specific); pass ``Worker(..., async_engine=...)`` or
``Worker(..., sync_engine=...)`` to choose them.  Derived engines belong to
the worker, which disposes of them when it stops.
"""

from __future__ import annotations

import importlib.util
import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import URL
from sqlalchemy.exc import OperationalError, SQLAlchemyError
from sqlalchemy.util import greenlet_spawn  # what AsyncConnection.run_sync runs (needs greenlet when called)

from venturi_sa.binds import is_async_engine
from venturi_sa.errors import AsyncDriverMissing, InvalidOption
from venturi_sa.worker.checkpoint import BlockingCall
from venturi_sa.worker.loop import worker_loop

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncEngine

T = TypeVar("T")
logger = logging.getLogger("venturi_sa.worker")
_LIBPQ = ("psycopg2", "psycopg", "psycopg_async")  # drivers sharing libpq's URL query parameters
_MODULES = {"psycopg_async": "psycopg", "psycopg": "psycopg", "psycopg2": "psycopg2", "asyncpg": "asyncpg"}
_EXTRAS = "install an async driver: pip install 'venturi[psycopg]' (psycopg 3) or 'venturi[asyncpg]'"
_SYNC_EXTRAS = "install a sync driver: pip install 'venturi[psycopg2]' or 'venturi[psycopg]' (psycopg 3)"


# -- the connection runner ----------------------------------------------------------------------

class Connections(Protocol):
    """Where the worker's own statements run; ``fn`` always gets a sync ``Connection``."""

    def begin(self, fn: Callable[[sa.Connection], T]) -> T:
        """``fn(conn)`` in a transaction committed when it returns (rolled back if it raises)."""

    def connect(self, fn: Callable[[sa.Connection], T]) -> T:
        """``fn(conn)`` on a connection, with no transaction committed for it."""


class SyncConnections:
    """A sync engine's connections, on the calling thread."""

    def __init__(self, engine: sa.Engine) -> None:
        self.engine = engine

    def begin(self, fn: Callable[[sa.Connection], T]) -> T:
        with self.engine.begin() as conn:
            return fn(conn)

    def connect(self, fn: Callable[[sa.Connection], T]) -> T:
        with self.engine.connect() as conn:
            return fn(conn)


class HeldConnections:
    """A sync engine's transactions on one kept connection, for the one thread that runs them.

    The connection is checked out on first use, so the engine's
    ``isolation_level`` is set once, not per transaction.  Each transaction
    is still ``BEGIN``, ``fn``, ``COMMIT``: nothing stays open between them.
    Any error rolls back and drops the connection (returned to the pool, or
    discarded if it died); the next transaction checks out another, so a
    server restart is handled as with a connection per transaction.
    :meth:`close` returns it to the pool; called from another thread while
    a transaction runs, the connection goes back when that one ends.
    """

    def __init__(self, engine: sa.Engine) -> None:
        self.engine = engine
        self._conn: sa.Connection | None = None
        self._lock = threading.Lock()
        self._busy = False
        self._closing = False

    def begin(self, fn: Callable[[sa.Connection], T]) -> T:
        def once(conn: sa.Connection) -> T:
            with conn.begin():
                return fn(conn)

        return self._run(once)

    def connect(self, fn: Callable[[sa.Connection], T]) -> T:
        """``fn(conn)``; whatever it began is rolled back afterwards."""
        def once(conn: sa.Connection) -> T:
            result = fn(conn)
            if conn.in_transaction():
                conn.rollback()
            return result

        return self._run(once)

    def _run(self, once: Callable[[sa.Connection], T]) -> T:
        """``once(conn)`` on the kept connection; a kept one found dead is replaced and ``once`` run again.

        The pool would have pinged a connection at checkout (``pool_pre_ping``)
        and replaced a dead one; a kept connection is not checked out again,
        so a disconnect on one that sat idle since its last transaction (the
        server restarted, its backend was terminated) gets one retry on a
        fresh connection.  ``once`` is a whole transaction of the worker's
        (a claim, an outcome batch, a read), safe to run again: if the lost
        transaction had committed after all, its claims expire and are
        recovered, its fenced outcome writes are refused the second time.
        """
        conn, reused = self._take()
        try:
            result = once(conn)
        except sa.exc.DBAPIError as exc:
            closing = self._closing  # closed meanwhile (the worker stops): no new connection
            self._give_back(drop=True)
            if closing or not (reused and exc.connection_invalidated):
                raise
            conn, _ = self._take()
            try:
                result = once(conn)
            except BaseException:
                self._give_back(drop=True)
                raise
        except BaseException:
            self._give_back(drop=True)
            raise
        self._give_back(drop=False)
        return result

    def close(self) -> None:
        """Return the kept connection to the pool (now, or when the running transaction ends)."""
        with self._lock:
            if self._busy:
                self._closing = True
                return
            conn, self._conn = self._conn, None
        _close_quietly(conn)

    def _take(self) -> tuple[sa.Connection, bool]:
        """The kept connection (checked out if there is none) and whether it was kept from before."""
        with self._lock:
            self._busy, self._closing = True, False
            conn = self._conn
        if conn is not None and not (conn.closed or conn.invalidated):
            return conn, True
        _close_quietly(conn)
        try:
            conn = self.engine.connect()
        except BaseException:
            self._give_back(drop=True)
            raise
        self._conn = conn
        return conn, False

    def _give_back(self, *, drop: bool) -> None:
        with self._lock:
            self._busy = False
            conn = self._conn
            if not (drop or self._closing):
                return
            self._conn, self._closing = None, False
        _close_quietly(conn)


def _close_quietly(conn: sa.Connection | None) -> None:
    if conn is None:
        return
    try:
        conn.close()
    except Exception:  # noqa: BLE001 - closing a dead connection must not hide the error that killed it
        logger.debug("closing a dropped worker connection failed", exc_info=True)


class AsyncConnections:
    """An async engine's connections, driven on the worker's loop; the caller waits.

    The whole transaction (checkout, ``BEGIN``, ``fn``, ``COMMIT``, checkin)
    is one greenlet on the loop, as ``AsyncConnection.run_sync`` runs its
    function: the driver's awaits happen inside it, so a transaction pays
    one greenlet start and one hop to the loop and back, instead of one
    per step of ``async with engine.begin()``.

    Errors are the ones the sync path raises (SQLAlchemy's, with the
    driver's SQLSTATE), so retries and fault handling are shared: what a
    driver raises outside SQLAlchemy's translation (asyncpg's errors while
    connecting: a refused connection, a timeout, a server starting up) comes
    out as an ``OperationalError``, as psycopg's do.  Never call it from the
    loop's own thread.
    """

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self._sync = SyncConnections(engine.sync_engine)  # its awaits work inside greenlet_spawn only

    def begin(self, fn: Callable[[sa.Connection], T]) -> T:
        return self._on_loop(self._sync.begin, fn)

    def connect(self, fn: Callable[[sa.Connection], T]) -> T:
        return self._on_loop(self._sync.connect, fn)

    @staticmethod
    def _on_loop(run: Callable[[Callable[[sa.Connection], T]], T], fn: Callable[[sa.Connection], T]) -> T:
        async def spawned() -> T:
            result: T = await greenlet_spawn(run, fn)
            return result

        loop = worker_loop()
        if loop.is_current():  # a sync ctx call from an async def handler: it would wait for its own loop
            raise BlockingCall("a sync ctx call from an async def handler on an async engine: use its *_async twin")
        try:
            return loop.run(spawned())
        except Exception as exc:
            raise _translated(exc) from exc


_DRIVER_PACKAGES = ("asyncpg", "psycopg")


def _translated(exc: Exception) -> Exception:
    """``exc``, or an ``OperationalError`` wrapping a connection error SQLAlchemy let through untranslated."""
    if isinstance(exc, SQLAlchemyError):
        return exc
    if isinstance(exc, OSError) or type(exc).__module__.split(".")[0] in _DRIVER_PACKAGES:
        return OperationalError(None, None, exc)
    return exc


# -- sibling engines ---------------------------------------------------------------------------

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
    """The sync-driver URL of an async engine's database (psycopg for psycopg_async, else psycopg2 or psycopg).

    Raises ``AsyncDriverMissing`` (a ``RuntimeError``) naming the extra when no sync driver is installed.
    """
    driver = engine.dialect.driver  # "psycopg" for postgresql+psycopg_async
    candidates = ["psycopg"] if driver in ("psycopg", "psycopg_async") else ["psycopg2", "psycopg"]
    for candidate in candidates:
        if _installed(candidate):
            return _sibling_url(engine.url, candidate, driver)
    raise AsyncDriverMissing(f"ctx.session needs a sync driver for {engine.url.get_backend_name()} "
                             f"(the worker's engine uses {driver!r}): {_SYNC_EXTRAS}; or use "
                             "ctx.session_async in an async def handler")


class WorkerEngines:
    """The engine the worker's own statements use (the one given), and the sibling of the other flavour.

    ``own`` is the engine given to ``Worker()``: a sync one, or an async one
    whose statements go through the async driver on the worker's loop.
    The sync engine (``ctx.session``) and the async one (``ctx.session_async``)
    are the given ones or derived from ``own``'s URL on first use.
    """

    def __init__(self, engine: sa.Engine | AsyncEngine, *, sync_engine: sa.Engine | None,
                 async_engine: AsyncEngine | None, pool_size: int) -> None:
        self.pool_size = pool_size
        self._derived: list[sa.Engine | AsyncEngine] = []
        self.own = engine
        if is_async_engine(engine):
            if async_engine is not None:
                raise InvalidOption("Worker got an AsyncEngine and async_engine=; pass sync_engine= instead")
            self.async_engine: AsyncEngine | None = engine
            self._sync = sync_engine
        else:
            assert isinstance(engine, sa.Engine)  # require_worker_engine() refused anything else
            if sync_engine is not None:
                raise InvalidOption("Worker got a sync Engine and sync_engine=; pass async_engine= instead")
            if engine.dialect.is_async:
                raise TypeError(f"Worker() got a sync Engine on the async driver {engine.dialect.driver!r}: "
                                "create it with create_async_engine() (its claims and outcomes then go "
                                "through that async driver)")
            self._sync = engine
            self.async_engine = async_engine
        if sync_engine is not None and (not isinstance(sync_engine, sa.Engine) or sync_engine.dialect.is_async):
            raise TypeError("Worker(sync_engine=...) takes a sync Engine on a sync driver")
        if self.async_engine is not None and not is_async_engine(self.async_engine):
            raise TypeError("Worker(async_engine=...) takes an AsyncEngine")

    @property
    def is_async(self) -> bool:
        """Whether the worker's own statements go through an async driver."""
        return is_async_engine(self.own)

    def connections(self, **execution_options: Any) -> Connections:
        """The runner for the worker's own statements, on ``own`` with ``execution_options``."""
        if is_async_engine(self.own):
            return AsyncConnections(self.own.execution_options(**execution_options))
        assert isinstance(self.own, sa.Engine)
        return SyncConnections(self.own.execution_options(**execution_options))

    def held(self, **execution_options: Any) -> HeldConnections | AsyncConnections:
        """A runner for one thread's own statements: a kept connection on a sync ``own``.

        An async ``own`` gets :meth:`connections` (its transactions already run on the worker loop).
        """
        if is_async_engine(self.own):
            return AsyncConnections(self.own.execution_options(**execution_options))
        assert isinstance(self.own, sa.Engine)
        return HeldConnections(self.own.execution_options(**execution_options))

    def get_sync(self) -> sa.Engine:
        """The sync engine (``ctx.session``), derived from the async engine's URL on first use."""
        if self._sync is None:
            assert self.async_engine is not None
            self._sync = sa.create_engine(sync_sibling_url(self.async_engine), pool_size=self.pool_size,
                                          max_overflow=self.pool_size, pool_pre_ping=True)
            self._derived.append(self._sync)
        return self._sync

    def get_async(self) -> AsyncEngine:
        """The async engine, derived from the sync engine's URL on first use."""
        if self.async_engine is None:
            from sqlalchemy.ext.asyncio import create_async_engine  # needs greenlet: only for async runs

            self.async_engine = create_async_engine(async_sibling_url(self.get_sync()), pool_size=self.pool_size,
                                                    max_overflow=self.pool_size, pool_pre_ping=True)
            self._derived.append(self.async_engine)
        return self.async_engine

    def derived(self) -> list[sa.Engine | AsyncEngine]:
        """The engines the worker created (and so disposes of)."""
        return list(self._derived)
