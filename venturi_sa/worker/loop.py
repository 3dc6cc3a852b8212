"""The worker's event loop: one per process, in its own daemon thread, for async handlers.

``async def`` handlers, their ``ctx.session_async`` and the outcome written
in that session all run on this loop; sync handlers keep their executor
threads.  An executor thread hands a coroutine over with :meth:`WorkerLoop.submit`
and waits on the returned future, so the run keeps its slot (and its kind's
cap) exactly as a sync run does.  Every worker of a process shares the loop,
so connections of an async engine the workers share are only ever used on
it.  After ``os.fork()`` the child gets a loop of its own on first use.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class WorkerLoop:
    """An asyncio loop running forever in a daemon thread."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._serve, name="venturi-loop", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Schedule ``coro`` on the loop; cancelling the future cancels its task."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the loop and wait for its result (never call this from the loop itself)."""
        if threading.current_thread() is self._thread:
            coro.close()
            raise RuntimeError("WorkerLoop.run() called on the loop's own thread; await the coroutine instead")
        return self.submit(coro).result()


_lock = threading.Lock()
_loops: dict[int, WorkerLoop] = {}


def worker_loop() -> WorkerLoop:
    """This process's worker loop, started on first use."""
    pid = os.getpid()
    with _lock:
        if pid not in _loops:
            _loops.clear()  # a loop inherited through fork has no thread in this process
            _loops[pid] = WorkerLoop()
        return _loops[pid]
