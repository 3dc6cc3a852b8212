"""The executor threads: each takes a claimed run and runs it through the run pipeline.

A claim's runs wait in one queue.  Threads are not woken one per run: the
thread that takes a run wakes one more idle thread first if runs are still
waiting and no thread is already on its way (a chain of wake-ups, as Go's
scheduler wakes one spinning thread at a time).  A thread whose handler
returns quickly takes the next waiting run itself, without a thread switch;
a handler that blocks leaves the rest to the thread it woke, which wakes
the next, so every waiting run still gets a thread of its own while its
slot is held.  There are ``count`` threads and never more runs in flight
than slots, so a run never waits for a thread, only for a wake-up.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterable

from venturi_sa.worker.run import Run


class Executors:
    """``count`` threads, each taking a claimed run and handing it to ``handle`` (the run pipeline)."""

    def __init__(self, count: int, handle: Callable[[Run], None]) -> None:
        self.handle = handle
        self._todo: deque[Run | None] = deque()
        self._cond = threading.Condition(threading.Lock())
        self._idle = 0  # threads waiting for a run
        self._waking = 0  # threads notified that have not yet looked at the queue
        self._threads = [threading.Thread(target=self._loop, name=f"venturi-exec-{i}", daemon=True)
                         for i in range(count)]

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def put(self, run: Run) -> None:
        self.put_many((run,))

    def put_many(self, runs: Iterable[Run | None]) -> None:
        """Queue runs (in order); one idle thread is woken unless one is on its way already."""
        with self._cond:
            self._todo.extend(runs)
            self._wake_one()

    def _wake_one(self) -> None:
        """Under the lock: wake an idle thread if runs wait and no woken thread has looked yet."""
        if self._todo and self._idle > self._waking and not self._waking:
            self._waking += 1
            self._cond.notify()

    def close(self, timeout: float) -> None:
        """Let each thread finish its current run and exit; wait up to ``timeout`` for them."""
        with self._cond:
            self._todo.extend([None] * len(self._threads))
            self._cond.notify_all()
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))

    def _take(self) -> Run | None:
        with self._cond:
            while not self._todo:
                self._idle += 1
                self._cond.wait()
                self._idle -= 1
                if self._waking:
                    self._waking -= 1
            run = self._todo.popleft()
            self._wake_one()  # more waiting: the next thread is on its way before this run starts
            return run

    def _loop(self) -> None:
        while True:
            run = self._take()
            if run is None:
                return
            self.handle(run)
