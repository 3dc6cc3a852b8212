"""The per-driver adapter: the only code that touches a DB-API connection itself.

Every statement venturi runs goes through SQLAlchemy, whose dialects hide the
driver (psycopg2, psycopg 3, asyncpg), so the SQL beside this module is the
same on all of them.  What SQLAlchemy does not cover lives here, one small
class per driver: waiting for ``NOTIFY`` on a dedicated ``LISTEN``
connection, and the raw connection's details (its server process id).  The
table :data:`DRIVERS` says which drivers venturi supports, which module each
needs and which extra installs it.

A ``LISTEN`` connection is taken out of the engine's pool (its listening
state must never follow it into another checkout) and runs in autocommit (a
``LISTEN`` inside an open transaction hears nothing until that commits).
Closing it, or losing it, ends the ``LISTEN``; nothing else is affected.
"""

from __future__ import annotations

import importlib.util
import re
import select
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import sqlalchemy as sa

from venturi_sa.errors import VenturiError

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

_CHANNEL = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


@dataclass(frozen=True)
class Driver:
    """One supported SQLAlchemy PostgreSQL driver (``postgresql+<name>://``)."""

    name: str  # SQLAlchemy's dialect driver name
    module: str  # what must be importable
    extra: str  # ``pip install 'venturi[<extra>]'`` installs it
    is_async: bool
    sync_siblings: tuple[str, ...] = ()  # sync drivers reaching the same servers, preferred first

    @property
    def installed(self) -> bool:
        """Whether the driver's module can be imported here."""
        if self.module in sys.modules:
            return sys.modules[self.module] is not None  # None: imports of it are blocked
        try:
            return importlib.util.find_spec(self.module) is not None
        except (ImportError, ValueError):
            return False


DRIVERS: dict[str, Driver] = {
    "psycopg2": Driver("psycopg2", "psycopg2", "psycopg2", is_async=False),
    "psycopg": Driver("psycopg", "psycopg", "psycopg", is_async=False),
    "asyncpg": Driver("asyncpg", "asyncpg", "asyncpg", is_async=True, sync_siblings=("psycopg", "psycopg2")),
    "psycopg_async": Driver("psycopg_async", "psycopg", "psycopg", is_async=True, sync_siblings=("psycopg",)),
}
DEFAULT_SYNC = ("psycopg2", "psycopg")  # what a plain ``postgresql://`` means, preferred first


class UnsupportedDriver(VenturiError):
    """The engine's driver has no adapter here (venturi supports psycopg2, psycopg and asyncpg)."""


class ListenConnectionLost(VenturiError):
    """The ``LISTEN`` connection was closed or broke; open a new one."""


@dataclass(frozen=True)
class Notification:
    channel: str
    payload: str


def _checked(channels: Sequence[str]) -> list[str]:
    for channel in channels:
        if not _CHANNEL.match(channel):
            raise ValueError(f"channel {channel!r} is not a lowercase SQL identifier")
    return list(channels)


def notify_statement(channel: str, payload: str = "") -> sa.Select[Any]:
    """``SELECT pg_notify(channel, payload)``: delivered when the transaction running it commits."""
    return sa.select(sa.func.pg_notify(sa.literal(channel, sa.Text), sa.literal(payload, sa.Text)))


def send_notify(conn: sa.Connection, channel: str, payload: str = "") -> None:
    """Queue ``NOTIFY channel, payload`` in ``conn``'s transaction (sent when it commits)."""
    conn.execute(notify_statement(channel, payload))


async def send_notify_async(conn: AsyncConnection, channel: str, payload: str = "") -> None:
    """:func:`send_notify` on an ``AsyncConnection``."""
    await conn.execute(notify_statement(channel, payload))


def driver_of(engine: sa.Engine | AsyncEngine) -> str:
    """The SQLAlchemy driver name of ``engine`` (``psycopg2``, ``psycopg``, ``asyncpg``, ...)."""
    return str(engine.dialect.driver)


# -- sync drivers ----------------------------------------------------------------------------

class Listening(Protocol):
    """A dedicated autocommit connection listening on some channels (one thread uses it)."""

    backend_pid: int

    def wait(self, timeout: float) -> list[Notification]:
        """Notifications that arrive within ``timeout`` seconds (returns at the first; [] if none).

        Raises :class:`ListenConnectionLost` if the connection is gone.
        """

    def close(self) -> None:
        """Close the connection (and so end the ``LISTEN``); never raises."""


class _SyncListening:
    def __init__(self, conn: Any, channels: Sequence[str]) -> None:
        self._conn = conn
        conn.autocommit = True
        cursor = conn.cursor()
        try:
            for channel in _checked(channels):
                cursor.execute(f'LISTEN "{channel}"')
        finally:
            cursor.close()
        self.backend_pid = self._pid()

    def _pid(self) -> int:
        raise NotImplementedError

    def wait(self, timeout: float) -> list[Notification]:
        raise NotImplementedError

    def close(self) -> None:
        try:
            self._conn.close()
        except Exception:  # noqa: BLE001 - closing a broken connection may fail too
            pass


class Psycopg2Listening(_SyncListening):
    """psycopg2: ``select()`` on the socket, then ``poll()`` and drain ``notifies``."""

    def _pid(self) -> int:
        return int(self._conn.get_backend_pid())

    def wait(self, timeout: float) -> list[Notification]:
        conn = self._conn
        try:
            if not conn.notifies and select.select([conn], [], [], timeout)[0]:
                conn.poll()
            elif conn.notifies:
                conn.poll()
        except Exception as exc:
            raise ListenConnectionLost(str(exc).strip() or type(exc).__name__) from exc
        got = [Notification(n.channel, n.payload) for n in conn.notifies]
        conn.notifies.clear()
        return got


class PsycopgListening(_SyncListening):
    """psycopg 3 (>= 3.2): the ``Connection.notifies(timeout=, stop_after=)`` generator."""

    def _pid(self) -> int:
        return int(self._conn.info.backend_pid)

    def wait(self, timeout: float) -> list[Notification]:
        try:
            return [Notification(n.channel, n.payload)
                    for n in self._conn.notifies(timeout=timeout, stop_after=1)]
        except Exception as exc:
            raise ListenConnectionLost(str(exc).strip() or type(exc).__name__) from exc


_SYNC: dict[str, type[_SyncListening]] = {"psycopg2": Psycopg2Listening, "psycopg": PsycopgListening}


def _unsupported(driver: str, kinds: str) -> UnsupportedDriver:
    return UnsupportedDriver(f"driver {driver} has no LISTEN adapter; {kinds}")


def listen(engine: sa.Engine, channels: Sequence[str]) -> Listening:
    """A new connection of ``engine``, out of its pool, in autocommit, listening on ``channels``."""
    cls = _SYNC.get(driver_of(engine))
    if cls is None:
        raise _unsupported(driver_of(engine), "sync engines use psycopg2 or psycopg")
    raw = engine.raw_connection()
    raw.detach()
    conn = raw.dbapi_connection
    try:
        return cls(conn, channels)
    except BaseException:
        if conn is not None:
            conn.close()
        raise


# -- async drivers ---------------------------------------------------------------------------

class AsyncListening(Protocol):
    """The async twin of :class:`Listening`, used from one event loop."""

    backend_pid: int

    async def wait(self, timeout: float) -> list[Notification]:
        """Notifications that arrive within ``timeout`` seconds; raises :class:`ListenConnectionLost`."""

    async def close(self) -> None:
        """Close the connection; never raises."""


class AsyncpgListening:
    """asyncpg: ``add_listener`` callbacks queue notifications; a termination listener flags loss."""

    def __init__(self, conn: Any) -> None:
        import asyncio

        self._conn = conn
        self._queue: list[Notification] = []
        self._arrived = asyncio.Event()
        self._lost = False
        self.backend_pid = int(conn.get_server_pid())

    async def start(self, channels: Sequence[str]) -> AsyncpgListening:
        self._conn.add_termination_listener(self._terminated)
        for channel in _checked(channels):
            await self._conn.add_listener(channel, self._received)
        return self

    def _received(self, conn: Any, pid: int, channel: str, payload: str) -> None:
        self._queue.append(Notification(channel, payload))
        self._arrived.set()

    def _terminated(self, conn: Any) -> None:
        self._lost = True
        self._arrived.set()

    async def wait(self, timeout: float) -> list[Notification]:
        import asyncio

        if not self._queue and not self._lost:
            self._arrived.clear()
            try:
                await asyncio.wait_for(self._arrived.wait(), timeout)
            except asyncio.TimeoutError:
                pass
        if self._lost or self._conn.is_closed():
            raise ListenConnectionLost("the asyncpg LISTEN connection was closed")
        got, self._queue = self._queue, []
        return got

    async def close(self) -> None:
        try:
            await self._conn.close(timeout=2)
        except Exception:  # noqa: BLE001 - closing a broken connection may fail too
            self._conn.terminate()


class PsycopgAsyncListening:
    """psycopg 3's ``AsyncConnection.notifies(timeout=, stop_after=)`` async generator."""

    def __init__(self, conn: Any) -> None:
        self._conn = conn
        self.backend_pid = int(conn.info.backend_pid)

    async def start(self, channels: Sequence[str]) -> PsycopgAsyncListening:
        await self._conn.set_autocommit(True)
        for channel in _checked(channels):
            await self._conn.execute(f'LISTEN "{channel}"')
        return self

    async def wait(self, timeout: float) -> list[Notification]:
        try:
            return [Notification(n.channel, n.payload)
                    async for n in self._conn.notifies(timeout=timeout, stop_after=1)]
        except Exception as exc:
            raise ListenConnectionLost(str(exc).strip() or type(exc).__name__) from exc

    async def close(self) -> None:
        try:
            await self._conn.close()
        except Exception:  # noqa: BLE001 - closing a broken connection may fail too
            pass


async def listen_async(engine: AsyncEngine, channels: Sequence[str]) -> AsyncListening:
    """The async :func:`listen`: a connection of ``engine`` out of its pool, listening on ``channels``."""
    driver = driver_of(engine)
    if driver not in ("asyncpg", "psycopg_async", "psycopg"):
        raise _unsupported(driver, "async engines use asyncpg or psycopg (postgresql+psycopg_async)")
    raw = await engine.raw_connection()
    conn = raw.driver_connection  # the asyncpg or psycopg connection itself (None once detached)
    assert conn is not None
    raw.detach()
    try:
        if driver == "asyncpg":
            return await AsyncpgListening(conn).start(channels)
        return await PsycopgAsyncListening(conn).start(channels)
    except BaseException:
        if driver == "asyncpg":
            conn.terminate()
        else:
            await conn.close()
        raise


__all__ = [
    "DEFAULT_SYNC",
    "DRIVERS",
    "AsyncListening",
    "Driver",
    "ListenConnectionLost",
    "Listening",
    "Notification",
    "UnsupportedDriver",
    "driver_of",
    "listen",
    "listen_async",
    "notify_statement",
    "send_notify",
    "send_notify_async",
]
