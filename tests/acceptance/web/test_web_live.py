"""The event stream: one feed per dashboard, woken by NOTIFY, polling at a bounded rate."""

from __future__ import annotations

import http.client
import socket
import threading
import time
from typing import Any
from urllib.parse import urlsplit

import sqlalchemy as sa
from support.web import enqueue_elsewhere, served

from venturi_sa.web import create_app


class Stream:
    """An open ``/events`` response read on a thread; ``changed`` is set on each ``change`` event."""

    def __init__(self, base: str) -> None:
        url = urlsplit(base)
        self.conn = http.client.HTTPConnection(url.hostname, url.port, timeout=30)
        self.conn.request("GET", "/events")
        self.response = self.conn.getresponse()
        assert self.response.status == 200
        assert self.response.getheader("content-type", "").startswith("text/event-stream")
        self.changes = 0
        self.changed = threading.Event()
        self.opened = threading.Event()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        try:
            for raw in self.response:
                line = raw.decode().strip()
                if line.startswith("retry:"):
                    self.opened.set()
                if line == "event: change":
                    self.changes += 1
                    self.changed.set()
        except Exception:  # noqa: BLE001 - the stream was closed under the reader: it is done
            return

    def close(self) -> None:
        if self.conn.sock is not None:  # wakes the reader blocked in recv (close alone waits for it)
            self.conn.sock.shutdown(socket.SHUT_RDWR)
        self.conn.close()


def test_an_enqueue_in_another_process_reaches_the_stream_through_notify(engine: sa.Engine, models: Any) -> None:
    # A poll interval far beyond the wait: only the NOTIFY can deliver the change in time.
    app = create_app(engine, models.prefix, poll_interval=60)
    feed = app.state.dashboard.feed
    with served(app) as base:
        stream = Stream(base)
        try:
            assert stream.opened.wait(10)
            stream.changed.wait(10)  # the first read after LISTEN connects reports the current state
            stream.changed.clear()
            reads = feed.reads
            enqueue_elsewhere(engine, models.prefix, "hello")
            assert stream.changed.wait(15), "no change event after the enqueue"
            assert feed.reads == reads + 1  # woken once, read once
        finally:
            stream.close()


def test_the_poll_is_shared_and_bounded_whatever_the_number_of_browsers(engine: sa.Engine, models: Any) -> None:
    interval = 0.2
    app = create_app(engine, models.prefix, listen=False, poll_interval=interval)
    feed = app.state.dashboard.feed
    with served(app) as base:
        streams = [Stream(base) for _ in range(4)]
        try:
            assert all(s.opened.wait(10) for s in streams)
            started, reads = time.monotonic(), feed.reads
            enqueue_elsewhere(engine, models.prefix, "polled")  # no LISTEN: the poll finds it
            assert all(s.changed.wait(15) for s in streams)
            elapsed = time.monotonic() - started
            # One reader for every browser, at most one read per poll interval (+1 in flight).
            assert feed.reads - reads <= elapsed / interval + 2
        finally:
            for s in streams:
                s.close()
