"""LISTEN on the queue's channel and wake the producer on every notification.

Runs on its own connection (see :mod:`venturi_sa.storage.drivers`, the one
place that knows each driver's way of waiting: psycopg2, psycopg 3, asyncpg).
On any connection error it logs one line, reconnects with a capped backoff
(failed attempts are logged at debug level only), logs one line when it is
back, and wakes the producer, since notifications sent while it was
disconnected are lost.  Meanwhile the producer's poll interval still drains
the queue.

After each connect the listener checks that it can hear at all: it sends a
probe ``NOTIFY`` on a private channel from another connection.  Through a
transaction-pooling proxy (PgBouncer ``pool_mode = transaction``) an idle
client is attached to no server connection and hears nothing; the probe then
never arrives, the listener logs one warning saying so and stops, and the
worker wakes by polling alone (as with ``listen=False``).

:class:`Listener` is the thread a :class:`~venturi_sa.worker.Worker` on a
sync engine runs; :class:`AsyncListener` is the same loop for an event loop,
and :class:`LoopListener` runs one on the worker's loop for a worker on an
async engine (asyncpg's ``add_listener``, psycopg 3's async ``notifies()``),
with the :class:`Listener` thread's interface.  Both are a
:class:`WorkerListener`: besides ``wake``, each sets its ``nudge`` event on a
notification carrying :data:`~venturi_sa.storage.cancels.CANCEL_PAYLOAD`
(the lease keeper then renews, and so reads cancel requests, at once instead
of at its next interval).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import secrets
import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

import sqlalchemy as sa

from venturi_sa.storage import drivers
from venturi_sa.storage.cancels import CANCEL_PAYLOAD
from venturi_sa.worker.loop import worker_loop

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncEngine

logger = logging.getLogger("venturi_sa.worker")
FIRST_BACKOFF = 0.1
WAIT_SLICE = 0.5  # the longest one wait blocks before checking for a stop
PROBE_TIMEOUT = 5.0  # how long a connection gets to hear its own probe NOTIFY


class Flag(Protocol):
    """What the listeners need of an event: ``threading.Event`` and ``asyncio.Event`` both qualify."""

    def set(self) -> None: ...

    def clear(self) -> None: ...

    def is_set(self) -> bool: ...


class WorkerListener(Protocol):
    """What a worker needs of its LISTEN part, thread or loop task: :class:`Listener` and :class:`LoopListener`."""

    connected: threading.Event  # set while the LISTEN connection is up
    deaf: threading.Event  # set when the probe went unheard: polling only
    nudge: threading.Event | None  # set on a cancel NOTIFY (the lease keeper's)

    @property
    def backend_pid(self) -> int | None: ...

    @property
    def reconnects(self) -> Reconnects: ...

    def start(self) -> None: ...

    def is_alive(self) -> bool: ...

    def join(self, timeout: float | None = None) -> None: ...


class Reconnects:
    """One listener's backoff and its log lines: one on loss, one on recovery."""

    def __init__(self, channel: str, max_backoff: float) -> None:
        self.channel = channel
        self.max_backoff = max_backoff
        self.delay = FIRST_BACKOFF
        self.lost_at: float | None = None
        self.losses = 0

    def failed(self, exc: BaseException) -> float:
        """Record a failure; returns how long to wait before the next attempt."""
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        if self.lost_at is None:
            self.lost_at = time.monotonic()
            self.losses += 1
            logger.warning("LISTEN connection lost (%s); reconnecting with backoff up to %.0fs, "
                           "polling meanwhile", reason, self.max_backoff)
        else:
            logger.debug("LISTEN reconnect failed (%s); next attempt in %.1fs", reason, self.delay)
        delay, self.delay = self.delay, min(self.delay * 2, self.max_backoff)
        return delay

    def connected(self) -> None:
        if self.lost_at is not None:
            logger.warning("LISTEN connection restored after %.1fs; waking the worker to catch up",
                           time.monotonic() - self.lost_at)
        self.lost_at = None
        self.delay = FIRST_BACKOFF


class Probe:
    """A private channel and the deadline by which this connection must hear its NOTIFY."""

    def __init__(self, timeout: float) -> None:
        self.channel = f"venturi_probe_{secrets.token_hex(6)}"
        self.timeout = timeout
        self.deadline: float | None = None

    def sent(self) -> None:
        self.deadline = time.monotonic() + self.timeout

    def sort(self, notes: Sequence[drivers.Notification], channel: str) -> bool:
        """Note a heard probe; returns whether ``notes`` hold a notification on ``channel``."""
        if any(n.channel == self.channel for n in notes):
            self.deadline = None
        return any(n.channel == channel for n in notes)

    def overdue(self) -> bool:
        return self.deadline is not None and time.monotonic() > self.deadline

    def warn(self, listen_channel: str) -> None:
        logger.warning(
            "LISTEN on %s heard nothing within %.0fs of a test NOTIFY: the connection probably goes "
            "through a transaction-pooling proxy (PgBouncer pool_mode=transaction), where LISTEN cannot "
            "work; this worker now wakes by polling every poll_interval; run it with listen=False "
            "(venturi worker --no-listen) or give it a direct connection to PostgreSQL",
            listen_channel, self.timeout)


def deliver(notes: Sequence[drivers.Notification], probe: Probe, channel: str, wake: Flag,
            nudge: Flag | None) -> None:
    """Act on what one wait heard: note the probe, ``wake`` on ``channel``, ``nudge`` on a cancel there."""
    if probe.sort(notes, channel):
        wake.set()
        if nudge is not None and any(n.channel == channel and n.payload == CANCEL_PAYLOAD for n in notes):
            nudge.set()


class Listener(threading.Thread):
    """The sync worker's LISTEN thread; sets ``wake`` on every notification of ``channel``."""

    def __init__(self, engine: sa.Engine, channel: str, wake: threading.Event,
                 stopping: threading.Event, max_backoff: float = 5.0,
                 probe_timeout: float | None = None, nudge: threading.Event | None = None) -> None:
        super().__init__(name=f"venturi-listener-{channel}", daemon=True)
        self.engine = engine
        self.channel = channel  # derived from a validated prefix: a safe identifier
        self.wake = wake
        self.nudge = nudge  # set on a cancel NOTIFY: the lease keeper renews (and reads cancels) now
        self.stopping = stopping
        self.connected = threading.Event()
        self.deaf = threading.Event()  # set when the probe went unheard: polling only
        self.reconnects = Reconnects(channel, max_backoff)
        self.probe = Probe(PROBE_TIMEOUT if probe_timeout is None else probe_timeout)
        self._listening: drivers.Listening | None = None

    @property
    def backend_pid(self) -> int | None:
        """The server process id of the LISTEN connection while connected."""
        listening = self._listening
        return listening.backend_pid if listening is not None else None

    def _open(self) -> None:
        self._listening = drivers.listen(self.engine, [self.channel, self.probe.channel])
        with self.engine.begin() as conn:
            drivers.send_notify(conn, self.probe.channel)
        self.probe.sent()
        self.reconnects.connected()
        self.connected.set()
        self.wake.set()  # catch up on anything sent while we were away

    def _close(self) -> None:
        listening, self._listening = self._listening, None
        self.connected.clear()
        if listening is not None:
            listening.close()

    def _step(self) -> None:
        if self._listening is None:
            self._open()
        assert self._listening is not None
        deliver(self._listening.wait(WAIT_SLICE), self.probe, self.channel, self.wake, self.nudge)
        if self.probe.overdue():
            self.probe.warn(self.channel)
            self.deaf.set()

    def run(self) -> None:
        while not self.stopping.is_set() and not self.deaf.is_set():
            try:
                self._step()
            except drivers.UnsupportedDriver as exc:
                logger.warning("%s; this worker wakes by polling every poll_interval", exc)
                self.deaf.set()
            except Exception as exc:  # noqa: BLE001 - any failure: reconnect
                self._close()
                self.stopping.wait(self.reconnects.failed(exc))
        self._close()


class AsyncListener:
    """:class:`Listener`'s loop for an event loop: ``await run()`` until ``stopping`` is set.

    ``engine`` is an ``AsyncEngine`` on asyncpg or psycopg (async); ``wake``
    is set on every notification of ``channel``, after each (re)connect, and
    never from another thread; ``nudge`` (if given) on a cancel notification.
    ``connected`` and ``deaf`` are asyncio events unless given (a
    ``threading.Event`` set from the loop works too).
    """

    def __init__(self, engine: AsyncEngine, channel: str, wake: Flag, stopping: asyncio.Event,
                 max_backoff: float = 5.0, probe_timeout: float | None = None,
                 connected: Flag | None = None, deaf: Flag | None = None, nudge: Flag | None = None) -> None:
        self.engine = engine
        self.channel = channel
        self.wake = wake
        self.nudge = nudge
        self.stopping = stopping
        self.connected: Flag = connected if connected is not None else asyncio.Event()
        self.deaf: Flag = deaf if deaf is not None else asyncio.Event()
        self.reconnects = Reconnects(channel, max_backoff)
        self.probe = Probe(PROBE_TIMEOUT if probe_timeout is None else probe_timeout)
        self._listening: drivers.AsyncListening | None = None

    @property
    def backend_pid(self) -> int | None:
        listening = self._listening
        return listening.backend_pid if listening is not None else None

    async def _open(self) -> None:
        self._listening = await drivers.listen_async(self.engine, [self.channel, self.probe.channel])
        async with self.engine.begin() as conn:
            await drivers.send_notify_async(conn, self.probe.channel)
        self.probe.sent()
        self.reconnects.connected()
        self.connected.set()
        self.wake.set()

    async def _close(self) -> None:
        listening, self._listening = self._listening, None
        self.connected.clear()
        if listening is not None:
            await listening.close()

    async def _step(self) -> None:
        if self._listening is None:
            await self._open()
        assert self._listening is not None
        deliver(await self._listening.wait(WAIT_SLICE), self.probe, self.channel, self.wake, self.nudge)
        if self.probe.overdue():
            self.probe.warn(self.channel)
            self.deaf.set()

    async def _pause(self, delay: float) -> None:
        try:
            await asyncio.wait_for(self.stopping.wait(), delay)
        except asyncio.TimeoutError:
            pass

    async def run(self) -> None:
        try:
            while not self.stopping.is_set() and not self.deaf.is_set():
                try:
                    await self._step()
                except drivers.UnsupportedDriver as exc:
                    logger.warning("%s; this worker wakes by polling every poll_interval", exc)
                    self.deaf.set()
                except Exception as exc:  # noqa: BLE001 - any failure: reconnect
                    await self._close()
                    await self._pause(self.reconnects.failed(exc))
        finally:
            await self._close()


class LoopListener:
    """An :class:`AsyncListener` on the worker's loop, with the :class:`Listener` thread's interface.

    The worker on an async engine listens through its async driver: same
    probe, reconnect backoff, log lines, catch-up wake and cancel nudge as
    the thread.  ``wake`` and ``nudge`` (``threading.Event`` s) are set from
    the loop; ``connected`` and ``deaf`` are ``threading.Event`` s any thread
    may wait on.  :meth:`join` stops it.
    """

    def __init__(self, engine: AsyncEngine, channel: str, wake: threading.Event,
                 max_backoff: float = 5.0, probe_timeout: float | None = None,
                 nudge: threading.Event | None = None) -> None:
        self.engine = engine
        self.channel = channel
        self.wake = wake
        self.nudge = nudge  # read when start() runs: set it before
        self.max_backoff = max_backoff
        self.probe_timeout = probe_timeout
        self.connected = threading.Event()
        self.deaf = threading.Event()
        self._listener: AsyncListener | None = None
        self._task: asyncio.Task[None] | None = None
        self._future: concurrent.futures.Future[None] | None = None

    @property
    def backend_pid(self) -> int | None:
        """The server process id of the LISTEN connection while connected."""
        listener = self._listener
        return listener.backend_pid if listener is not None else None

    @property
    def reconnects(self) -> Reconnects:
        """The backoff and loss count of the running :class:`AsyncListener`."""
        assert self._listener is not None, "LoopListener.start() was not called"
        return self._listener.reconnects

    async def _serve(self) -> None:
        self._task = asyncio.current_task()
        self._listener = AsyncListener(self.engine, self.channel, self.wake, asyncio.Event(), self.max_backoff,
                                       self.probe_timeout, connected=self.connected, deaf=self.deaf,
                                       nudge=self.nudge)
        await self._listener.run()

    def start(self) -> None:
        self._future = worker_loop().submit(self._serve())

    def is_alive(self) -> bool:
        return self._future is not None and not self._future.done()

    def join(self, timeout: float | None = None) -> None:
        """Stop listening (closing the connection) and wait up to ``timeout`` seconds for it."""
        future = self._future
        if future is None:
            return
        loop = worker_loop().loop

        def stop() -> None:  # on the loop: cut the current wait short; run() closes the connection
            if self._listener is not None:
                self._listener.stopping.set()
            if self._task is not None:
                self._task.cancel()
            else:  # not started on the loop yet
                future.cancel()

        loop.call_soon_threadsafe(stop)
        try:
            future.result(timeout)
        except (concurrent.futures.CancelledError, concurrent.futures.TimeoutError):
            pass
        except Exception:  # noqa: BLE001 - AsyncListener.run() handles its own errors
            logger.debug("the LISTEN task failed", exc_info=True)


__all__ = ["AsyncListener", "Listener", "LoopListener", "PROBE_TIMEOUT", "WorkerListener", "deliver"]
