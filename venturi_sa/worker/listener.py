"""LISTEN on the queue's channel and wake the producer on every notification.

Runs on its own connection, taken out of the pool (so its LISTEN state never
leaks into other checkouts) and in autocommit (a LISTEN inside an open
transaction hears nothing).  On any connection error it reconnects with a
capped backoff and wakes the producer, since notifications sent while it was
disconnected are lost.
"""

from __future__ import annotations

import logging
import select
import threading
from typing import Any

import sqlalchemy as sa

logger = logging.getLogger("venturi_sa.worker")


class Listener(threading.Thread):
    def __init__(self, engine: sa.Engine, channel: str, wake: threading.Event,
                 stopping: threading.Event, max_backoff: float = 5.0) -> None:
        super().__init__(name=f"venturi-listener-{channel}", daemon=True)
        self.engine = engine
        self.channel = channel  # derived from a validated prefix: a safe identifier
        self.wake = wake
        self.stopping = stopping
        self.max_backoff = max_backoff
        self.connected = threading.Event()
        self._conn: Any = None

    def _connect(self) -> Any:
        raw = self.engine.raw_connection()
        raw.detach()
        conn = raw.dbapi_connection
        assert conn is not None
        conn.autocommit = True
        cur = conn.cursor()
        try:
            cur.execute(f'LISTEN "{self.channel}"')
        finally:
            cur.close()
        return conn

    def _close(self) -> None:
        conn, self._conn = self._conn, None
        self.connected.clear()
        if conn is not None:
            try:
                conn.close()
            except Exception:  # noqa: BLE001 - closing a broken connection may fail too
                pass

    def run(self) -> None:
        backoff = 0.1
        while not self.stopping.is_set():
            try:
                if self._conn is None:
                    self._conn = self._connect()
                    self.connected.set()
                    backoff = 0.1
                    self.wake.set()  # catch up on anything sent while we were away
                ready, _, _ = select.select([self._conn], [], [], 0.5)
                if ready:
                    self._conn.poll()
                    if self._conn.notifies:
                        self._conn.notifies.clear()
                        self.wake.set()
            except Exception as exc:  # noqa: BLE001 - any failure: reconnect
                logger.warning("LISTEN connection lost (%s); reconnecting in %.1fs", exc, backoff)
                self._close()
                self.stopping.wait(backoff)
                backoff = min(backoff * 2, self.max_backoff)
        self._close()
