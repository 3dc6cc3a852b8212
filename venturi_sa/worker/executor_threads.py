"""The executor threads: each takes a claimed run and runs it through the run pipeline."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable

from venturi_sa.worker.run import Run


class Executors:
    """``count`` threads, each taking a claimed run and handing it to ``handle`` (the run pipeline)."""

    def __init__(self, count: int, handle: Callable[[Run], None]) -> None:
        self.handle = handle
        self._todo: queue.SimpleQueue[Run | None] = queue.SimpleQueue()
        self._threads = [threading.Thread(target=self._loop, name=f"venturi-exec-{i}", daemon=True)
                         for i in range(count)]

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def put(self, run: Run) -> None:
        self._todo.put(run)

    def close(self, timeout: float) -> None:
        """Let each thread finish its current run and exit; wait up to ``timeout`` for them."""
        for _ in self._threads:
            self._todo.put(None)
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))

    def _loop(self) -> None:
        while True:
            run = self._todo.get()
            if run is None:
                return
            self.handle(run)
