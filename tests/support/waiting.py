"""Waiting in tests: one poll with a deadline, and an event recorder to wait on a worker's events.

A test waits for what it needs (a row, an event), never for a fixed time;
every wait fails with a message saying what it waited for.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

WAIT = 20.0  # seconds an awaited event gets before the test fails


def wait_until(predicate: Callable[[], Any], timeout: float = WAIT, what: str = "condition",
               every: float = 0.02) -> Any:
    """Poll ``predicate`` until it returns something truthy (and return that); fail after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(every)


class Events:
    """An ``on_event`` hook that records events and lets a test wait for one.

    ``hooks[name]`` callables run inside the hook (on the worker's thread)
    for the event ``name``.
    """

    def __init__(self) -> None:
        self.seen: list[tuple[float, str, dict[str, Any]]] = []
        self.hooks: dict[str, Callable[[dict[str, Any]], None]] = {}
        self._cond = threading.Condition()

    def __call__(self, name: str, data: dict[str, Any]) -> None:
        with self._cond:
            self.seen.append((time.monotonic(), name, dict(data)))
            self._cond.notify_all()
        hook = self.hooks.get(name)
        if hook is not None:
            hook(data)

    def of(self, name: str, **match: Any) -> list[tuple[float, dict[str, Any]]]:
        with self._cond:
            return [(at, d) for at, n, d in self.seen
                    if n == name and all(d.get(k) == v for k, v in match.items())]

    def wait_for(self, name: str, timeout: float = WAIT, after: int = 0,
                 **match: Any) -> tuple[float, dict[str, Any]]:
        """The first event ``name`` (from index ``after``) whose data contains ``match``."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for at, seen_name, data in self.seen[after:]:
                    if seen_name == name and all(data.get(k) == v for k, v in match.items()):
                        return at, data
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"no {name!r} event matching {match} within {timeout}s")
                self._cond.wait(left)

    def wait_count(self, name: str, n: int, timeout: float = WAIT) -> None:
        deadline = time.monotonic() + timeout
        with self._cond:
            while sum(1 for _, seen_name, _ in self.seen if seen_name == name) < n:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"fewer than {n} {name!r} events within {timeout}s")
                self._cond.wait(left)

    def mark(self) -> int:
        with self._cond:
            return len(self.seen)
