"""Several worker processes on one machine: a supervisor that starts, restarts and stops them.

Each child is started with ``multiprocessing``'s *spawn* method, so it
inherits no threads, connections or pools from the supervisor: it builds
its own engine and :class:`~venturi_sa.worker.Worker` (``target(index)``
runs in the child).  Children share nothing but PostgreSQL: claims use
``FOR UPDATE SKIP LOCKED``, each child has its own ``worker_id`` (so its own
leases), and a dead child's claims are recovered like any crashed worker's.

* A child that dies (non-zero exit status or killed by a signal) while
  the supervisor runs is restarted after a backoff that doubles with each
  quick death (``min_backoff`` up to ``max_backoff``) and resets once a
  child stayed up ``stable_after`` seconds.  A child that exits with status
  0 (its worker stopped on its own, e.g. ``run_until_idle``) is not restarted.
* SIGTERM or SIGINT to the supervisor is forwarded to every child (each
  stops claiming and drains within its grace period; a second signal stops
  them at once).  Children run in their own process group, so a terminal's
  Ctrl-C reaches them once, through the supervisor.  Children still alive
  ``stop_timeout`` seconds after the first signal are killed (their claims
  then expire and are recovered).
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import wait
from multiprocessing.process import BaseProcess
from types import FrameType
from typing import Any

from venturi_sa.errors import InvalidOption

logger = logging.getLogger("venturi_sa.worker")


def _exit_quietly(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(0)


def _child_main(target: Callable[[int], Any], index: int) -> None:
    """Entry point of a child: its own process group, then ``target(index)``.

    A stop signal that arrives before the child's worker installed its own
    handlers (while it imports or connects), or after they were restored,
    ends the child with status 0: it holds no claim then.
    """
    os.setpgid(0, 0)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, _exit_quietly)
    target(index)


@dataclass
class _Slot:
    index: int
    process: BaseProcess | None = None
    started: float = 0.0
    deaths: int = 0  # quick deaths in a row
    restart_at: float | None = None
    done: bool = False  # exited with status 0: not restarted


class Supervisor:
    """Runs ``processes`` children, each calling ``target(index)``, until all have stopped.

    ``target`` must be picklable (a module-level function, or a
    ``functools.partial`` of one): children are spawned, not forked.
    ``on_start(index, pid)`` is called in the supervisor each time a child
    starts (for tests and logs).
    """

    def __init__(self, target: Callable[[int], Any], processes: int, *, min_backoff: float = 0.5,
                 max_backoff: float = 30.0, stable_after: float = 30.0, stop_timeout: float = 60.0,
                 on_start: Callable[[int, int], None] | None = None) -> None:
        if processes < 1:
            raise InvalidOption(f"processes must be >= 1, got {processes}")
        self.target = target
        self.min_backoff = min_backoff
        self.max_backoff = max_backoff
        self.stable_after = stable_after
        self.stop_timeout = stop_timeout
        self.on_start = on_start
        self._ctx = multiprocessing.get_context("spawn")
        self._slots = [_Slot(i) for i in range(processes)]
        self._stop_signals: list[int] = []
        self._stop_deadline: float | None = None
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_w, False)

    # -- public ----------------------------------------------------------------------------
    def run(self) -> int:
        """Start the children and supervise them until every one has exited; returns how many were restarted.

        Installs SIGTERM/SIGINT handlers when called on the main thread (restored on return).
        """
        restore = self._install_signals()
        restarts = 0
        try:
            for slot in self._slots:
                self._start(slot)
            while any(s.process is not None or s.restart_at is not None for s in self._slots):
                restarts += self._step()
        finally:
            restore()
            os.close(self._wake_r)
            os.close(self._wake_w)
        return restarts

    def stop(self, signum: int = signal.SIGTERM) -> None:
        """Ask every child to stop (``signum`` forwarded); no child is restarted afterwards."""
        self._stop_signals.append(signum)
        try:
            os.write(self._wake_w, b"x")
        except (BlockingIOError, OSError):
            pass

    @property
    def pids(self) -> list[int]:
        """The pids of the children alive now."""
        return [s.process.pid for s in self._slots if s.process is not None and s.process.pid is not None]

    # -- the loop ----------------------------------------------------------------------------
    def _step(self) -> int:
        now = time.monotonic()
        waits = [s.restart_at - now for s in self._slots if s.restart_at is not None]
        if self._stop_deadline is not None:
            waits.append(self._stop_deadline - now)
        timeout = max(0.0, min(waits)) if waits else None
        sentinels = {s.process.sentinel: s for s in self._slots if s.process is not None}
        ready = wait([*sentinels, self._wake_r], timeout)
        if self._wake_r in ready:
            os.read(self._wake_r, 64)
        self._forward_stops()
        restarts = 0
        for sentinel in ready:
            slot = sentinels.get(sentinel) if isinstance(sentinel, int) else None
            if slot is not None:
                self._reap(slot)
        now = time.monotonic()
        for slot in self._slots:
            if slot.restart_at is not None and now >= slot.restart_at:
                slot.restart_at = None
                if self._stop_deadline is None:
                    self._start(slot)
                    restarts += 1
        if self._stop_deadline is not None and now >= self._stop_deadline:
            for slot in self._slots:
                if slot.process is not None and slot.process.is_alive():
                    logger.error("worker process %d (pid %s) did not stop in %.0fs; killing it",
                                 slot.index, slot.process.pid, self.stop_timeout)
                    slot.process.kill()
            self._stop_deadline = now + 5.0
        return restarts

    def _forward_stops(self) -> None:
        while self._stop_signals:
            signum = self._stop_signals.pop(0)
            if self._stop_deadline is None:
                self._stop_deadline = time.monotonic() + self.stop_timeout
            for slot in self._slots:
                slot.restart_at = None
                if slot.process is not None and slot.process.pid is not None and slot.process.is_alive():
                    try:
                        os.kill(slot.process.pid, signum)
                    except ProcessLookupError:
                        pass

    def _start(self, slot: _Slot) -> None:
        process = self._ctx.Process(target=_child_main, args=(self.target, slot.index),
                                    name=f"venturi-worker-{slot.index}", daemon=False)
        process.start()
        slot.process, slot.started = process, time.monotonic()
        logger.info("worker process %d started (pid %s)", slot.index, process.pid)
        if self.on_start is not None and process.pid is not None:
            self.on_start(slot.index, process.pid)

    def _reap(self, slot: _Slot) -> None:
        assert slot.process is not None
        slot.process.join()
        code, pid = slot.process.exitcode, slot.process.pid
        slot.process.close()
        slot.process = None
        if code == 0 or self._stop_deadline is not None:
            slot.done = True
            logger.info("worker process %d (pid %s) exited with status %s", slot.index, pid, code)
            return
        lived = time.monotonic() - slot.started
        slot.deaths = 1 if lived >= self.stable_after else slot.deaths + 1
        delay = min(self.max_backoff, self.min_backoff * 2 ** (slot.deaths - 1))
        slot.restart_at = time.monotonic() + delay
        how = f"killed by {signal.Signals(-code).name}" if code is not None and code < 0 else f"status {code}"
        logger.error("worker process %d (pid %s) died (%s) after %.1fs; restarting it in %.1fs",
                     slot.index, pid, how, lived, delay)

    # -- signals -------------------------------------------------------------------------------
    def _install_signals(self) -> Callable[[], None]:
        import threading

        if threading.current_thread() is not threading.main_thread():
            return lambda: None

        def handle(signum: int, frame: FrameType | None) -> None:
            logger.warning("%s: stopping %d worker processes", signal.Signals(signum).name, len(self.pids))
            self.stop(signum)

        previous = {sig: signal.signal(sig, handle) for sig in (signal.SIGTERM, signal.SIGINT)}

        def restore() -> None:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

        return restore


__all__ = ["Supervisor"]
