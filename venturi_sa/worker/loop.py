"""The worker's event loop: one per process, in its own daemon thread, for async handlers.

``async def`` handlers, their ``ctx.session_async`` and the outcome written
in that session all run on this loop; sync handlers keep their executor
threads.  An executor thread starts a handler's coroutine as a task with
:meth:`WorkerLoop.start` and waits for that task itself (:class:`LoopTask`),
not for a proxy future: a cancelled handler keeps its slot (and its kind's
cap) until its ``except CancelledError``/``finally`` code has run, exactly as
a sync run keeps it until it returns.  ``SystemExit`` and
``KeyboardInterrupt`` raised in a task end that task only, never the loop.
Every worker of a process shares the loop,
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


class _Escaped(Exception):
    """Carries a ``SystemExit``/``KeyboardInterrupt`` out of a task: raised bare, asyncio would re-raise it
    out of ``run_forever`` and end the loop's thread (and every later async run with it)."""

    def __init__(self, exc: BaseException) -> None:
        super().__init__(repr(exc))
        self.exc = exc


async def _guarded(coro: Coroutine[Any, Any, Any]) -> Any:
    try:
        return await coro
    except (SystemExit, KeyboardInterrupt) as exc:
        raise _Escaped(exc) from None


class LoopTask:
    """A coroutine running as an ``asyncio.Task`` on the worker loop, held by the thread that waits for it.

    :meth:`cancel` (from any thread) cancels the task on the loop;
    :meth:`result` returns only once the task has ended, whatever its
    coroutine does after the cancel.  (Cancelling the future of
    ``run_coroutine_threadsafe`` instead reports done at once, while the
    coroutine's cleanup is still running.)
    """

    __slots__ = ("_loop", "_task", "_cancelled", "_done", "_value", "_error")

    def __init__(self, loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, Any]) -> None:
        self._loop = loop
        self._task: asyncio.Task[Any] | None = None
        self._cancelled = False
        self._done = threading.Event()
        self._value: Any = None
        self._error: BaseException | None = None
        loop.call_soon_threadsafe(self._spawn, coro)

    def _spawn(self, coro: Coroutine[Any, Any, Any]) -> None:
        self._task = task = self._loop.create_task(_guarded(coro))
        task.add_done_callback(self._ended)
        if self._cancelled:
            task.cancel()

    def _ended(self, task: asyncio.Task[Any]) -> None:
        if task.cancelled():
            self._error = asyncio.CancelledError()
        else:
            error = task.exception()
            self._error = error.exc if isinstance(error, _Escaped) else error
            if error is None:
                self._value = task.result()
        self._done.set()

    def _cancel_on_loop(self) -> None:
        if self._task is not None and not self._task.done():
            self._task.cancel()

    def cancel(self) -> bool:
        """Ask the loop to cancel the task (at its next ``await``); True unless it has ended already."""
        if self._done.is_set():
            return False
        self._cancelled = True
        self._loop.call_soon_threadsafe(self._cancel_on_loop)
        return True

    def wait(self, timeout: float | None = None) -> bool:
        """Block up to ``timeout`` seconds for the task to end; True if it has."""
        return self._done.wait(timeout)

    def result(self) -> Any:
        """Wait for the task to end; return its value or raise its exception (``CancelledError`` if cancelled)."""
        self._done.wait()
        if self._error is not None:
            raise self._error
        return self._value


class WorkerLoop:
    """An asyncio loop running forever in a daemon thread."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._serve, name="venturi-loop", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def start(self, coro: Coroutine[Any, Any, Any]) -> LoopTask:
        """Run ``coro`` as a task on the loop; the returned handle cancels it and waits for its end."""
        return LoopTask(self.loop, coro)

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Schedule ``coro`` on the loop; cancelling the future cancels its task."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def is_current(self) -> bool:
        """Whether the caller runs on the loop's own thread (where :meth:`run` would block its own loop)."""
        return threading.current_thread() is self._thread

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
