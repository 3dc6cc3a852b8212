"""Live updates: one feed per dashboard, woken by the queue's NOTIFY, with a bounded poll.

The feed runs while at least one browser is subscribed (server-sent events).
Its thread waits for the queue's ``NOTIFY`` (the worker's
:class:`~venturi_sa.worker.listener.Listener` on its own connection: enqueues
send one) or at most ``poll_interval`` seconds (worker outcomes send none, and
LISTEN does not work through a transaction-pooling proxy), then reads the change
token (two one-row index probes) and, if it changed, tells every subscriber.
So the database sees at most one token read per ``poll_interval`` (and one per
notification, spaced by ``min_gap``), whatever the number of browsers; each
browser then re-reads the fragments it shows.  Nothing here writes.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import AsyncIterator, Callable
from typing import Any

from venturi_sa.worker.listener import Listener

logger = logging.getLogger("venturi_sa.web")
KEEPALIVE = 15.0  # seconds between SSE comments that keep proxies from closing an idle stream


class Subscriber:
    """One browser's stream: the loop it lives on and a one-slot queue (changes coalesce)."""

    def __init__(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.queue: asyncio.Queue[str] = asyncio.Queue(maxsize=1)

    def _put(self, value: str) -> None:
        if self.queue.full():
            self.queue.get_nowait()
        self.queue.put_nowait(value)

    def tell(self, value: str) -> None:
        """Called from the feed thread: hand ``value`` to the subscriber's loop."""
        try:
            self.loop.call_soon_threadsafe(self._put, value)
        except RuntimeError:  # the loop is closed: the browser is gone
            pass


class Feed:
    """Runs a LISTEN thread and a token watcher while anyone is subscribed."""

    def __init__(self, engine: Any, channel: str, read_token: Callable[[], tuple[Any, ...]],
                 poll_interval: float = 2.0, min_gap: float = 0.3, listen: bool = True) -> None:
        self.engine = engine
        self.channel = channel
        self.read_token = read_token
        self.poll_interval = poll_interval
        self.min_gap = min_gap
        self.listen = listen
        self.reads = 0  # token reads so far (tests check the poll stays bounded)
        self._subscribers: set[Subscriber] = set()
        self._lock = threading.Lock()
        self._stopping: threading.Event | None = None
        self._wake = threading.Event()
        self._token: tuple[Any, ...] | None = None

    def subscribe(self, subscriber: Subscriber) -> None:
        with self._lock:
            self._subscribers.add(subscriber)
            if self._stopping is None:
                self._start()

    def unsubscribe(self, subscriber: Subscriber) -> None:
        with self._lock:
            self._subscribers.discard(subscriber)
            if not self._subscribers and self._stopping is not None:
                self._stopping.set()
                self._stopping = None

    def close(self) -> None:
        """Stop the threads (subscribers get no more changes)."""
        with self._lock:
            self._subscribers.clear()
            if self._stopping is not None:
                self._stopping.set()
                self._stopping = None

    def _start(self) -> None:
        stopping = self._stopping = threading.Event()
        if self.listen:
            Listener(self.engine, self.channel, self._wake, stopping).start()
        threading.Thread(target=self._watch, args=(stopping,), name=f"venturi-web-feed-{self.channel}",
                         daemon=True).start()

    def _watch(self, stopping: threading.Event) -> None:
        while not stopping.is_set():
            self._wake.wait(self.poll_interval)
            self._wake.clear()
            if stopping.is_set():
                return
            try:
                self.reads += 1
                token = self.read_token()
            except Exception as exc:  # noqa: BLE001 - the database is away: try again next poll
                logger.warning("dashboard live feed: cannot read the queue (%s)", exc)
                stopping.wait(self.poll_interval)
                continue
            if token != self._token:
                self._token = token
                with self._lock:
                    targets = list(self._subscribers)
                for subscriber in targets:
                    subscriber.tell(repr(token[0]))
            stopping.wait(self.min_gap)

    async def events(self) -> AsyncIterator[str]:
        """The SSE stream of one browser: a ``change`` event per change, comments to keep it open."""
        subscriber = Subscriber()
        self.subscribe(subscriber)
        try:
            yield "retry: 2000\n\n"
            while True:
                try:
                    value = await asyncio.wait_for(subscriber.queue.get(), KEEPALIVE)
                except asyncio.TimeoutError:
                    yield ": keepalive\n\n"
                    continue
                yield f"event: change\ndata: {value}\n\n"
        finally:
            self.unsubscribe(subscriber)
