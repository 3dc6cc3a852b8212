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
* A child that cannot be started (``fork``/``exec`` failing with ``EAGAIN``
  or ``ENOMEM``: any ``OSError``) counts as a death: its slot is tried
  again after the same backoff.
* If anything else raises in :meth:`Supervisor.run` (a bug, ``KeyboardInterrupt``),
  the supervisor stops every child (SIGTERM, ``stop_timeout`` seconds to
  drain), kills those still alive, then raises.
* SIGTERM and SIGINT are held (blocked) in the supervisor's thread while it
  spawns a child, and the child inherits that mask: a stop signal sent to the
  child while it starts (the interpreter, the imports, the target's
  unpickling) waits until :func:`_child_main` has installed its quiet-exit
  handler and unblocked them, then ends the child with status 0.  One sent to
  the supervisor meanwhile is delivered as the spawn returns, and forwarded.
* A child ends when the supervisor dies, even by SIGKILL.  On Linux the
  child asks the kernel for SIGTERM when its parent dies
  (``prctl(PR_SET_PDEATHSIG)``, through ctypes; the parent is the thread that
  called :meth:`Supervisor.run`, alive as long as the children are); everywhere,
  a daemon thread of the child polls ``os.getppid()`` once a second and, once
  the parent is gone, sends the child SIGTERM itself where the kernel did not.
  Either way the child's worker drains as on any SIGTERM, and a child still
  alive ``stop_timeout`` seconds after its parent died ends with
  ``os._exit(1)`` (its claims are recovered when their leases expire).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import multiprocessing
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from multiprocessing.connection import wait
from multiprocessing.process import BaseProcess
from types import FrameType
from typing import Any

from venturi_sa.errors import InvalidOption

logger = logging.getLogger("venturi_sa.worker")
PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>
ORPHAN_POLL = 1.0  # seconds between a child's looks at its parent pid
KILL_WAIT = 5.0  # seconds the supervisor waits for a killed child to be reaped
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def _exit_quietly(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(0)


@contextmanager
def stops_held() -> Iterator[None]:
    """Block SIGTERM and SIGINT in the calling thread for the block; a child spawned meanwhile inherits the mask.

    A stop signal that arrives meanwhile stays pending, not lost: the
    previous mask is restored at the end of the block (also when it raises),
    and the signal is then delivered to this process's handler.  Nothing
    happens where ``signal.pthread_sigmask`` does not exist.
    """
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def _tracker_running() -> None:
    """Start ``multiprocessing``'s resource tracker now if it is not running, before :func:`stops_held`.

    A spawn starts it lazily, and starting it *unblocks* SIGTERM and SIGINT in
    the calling thread when it is done (its own spawn blocks them around
    itself): inside :func:`stops_held` that would let the child that is being
    spawned start with them unblocked.
    """
    if os.name != "posix":
        return
    from multiprocessing import resource_tracker

    resource_tracker.ensure_running()


@contextmanager
def stops_exit_quietly() -> Iterator[None]:
    """SIGTERM or SIGINT during the block ends this process with status 0 (``SystemExit(0)``).

    For start-up work before a process has anything to stop (the command's
    import of the app, its schema check); the previous handlers are restored
    at the end.  A no-op off the main thread.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, _exit_quietly) for sig in STOP_SIGNALS}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _kernel_signals_orphan() -> bool:
    """Ask Linux for SIGTERM when this process's parent dies; False where that is not available."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        return int(libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def _watch_parent(parent: int, kernel_signals: bool, stop_timeout: float) -> None:
    """A child's daemon thread: once ``parent`` is gone, SIGTERM (unless the kernel sent it), then exit by force."""
    while os.getppid() == parent:
        time.sleep(ORPHAN_POLL)
    logger.error("the supervisor (pid %d) is gone: worker process %d stops", parent, os.getpid())
    if not kernel_signals:
        os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(stop_timeout)
    logger.error("worker process %d did not stop %.0fs after its supervisor died; exiting", os.getpid(),
                 stop_timeout)
    os._exit(1)


def _child_main(target: Callable[[int], Any], index: int, parent: int, stop_timeout: float) -> None:
    """Entry point of a child: its own process group, tied to the life of ``parent``, then ``target(index)``.

    A stop signal that arrives before the child's worker installed its own
    handlers, or after they were restored, ends the child with status 0: it
    holds no claim then.  That includes one sent before this function ran
    (while the interpreter started and the target was unpickled): the child
    was spawned with SIGTERM and SIGINT blocked (:func:`stops_held`), and they
    are unblocked only here, once the quiet-exit handler is installed, so a
    pending one is acted on at once.  A child whose parent died before the tie
    was made exits at once, with status 0.
    """
    os.setpgid(0, 0)
    for sig in STOP_SIGNALS:
        signal.signal(sig, _exit_quietly)
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)  # a stop pending since the spawn ends us here
    kernel_signals = _kernel_signals_orphan()
    if os.getppid() != parent:
        raise SystemExit(0)
    threading.Thread(target=_watch_parent, args=(parent, kernel_signals, stop_timeout),
                     name="venturi-orphan-watch", daemon=True).start()
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
    starts (for tests and logs).  ``start_child(process)`` starts a child
    process (default: ``process.start()``); it is a seam for tests, which
    make it fail as ``fork`` does under a process limit.
    """

    def __init__(self, target: Callable[[int], Any], processes: int, *, min_backoff: float = 0.5,
                 max_backoff: float = 30.0, stable_after: float = 30.0, stop_timeout: float = 60.0,
                 on_start: Callable[[int, int], None] | None = None,
                 start_child: Callable[[BaseProcess], None] | None = None) -> None:
        if processes < 1:
            raise InvalidOption(f"processes must be >= 1, got {processes}")
        self.target = target
        self.min_backoff = min_backoff
        self.max_backoff = max_backoff
        self.stable_after = stable_after
        self.stop_timeout = stop_timeout
        self.on_start = on_start
        self.start_child = start_child
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
        If anything raises meanwhile, every child gets SIGTERM and
        ``stop_timeout`` seconds to drain, those still alive are killed, and
        all are reaped before the error propagates.
        """
        restore = self._install_signals()
        restarts = 0
        try:
            for slot in self._slots:
                self._start(slot)
            while any(s.process is not None or s.restart_at is not None for s in self._slots):
                restarts += self._step()
        except BaseException as exc:
            logger.error("the supervisor failed (%s: %s): stopping its %d worker processes", type(exc).__name__,
                         exc, len(self.pids))
            self._end_children()
            raise
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

    def _end_children(self) -> None:
        """SIGTERM every live child, wait ``stop_timeout`` for them to drain, SIGKILL the rest; reap all."""
        live = [s.process for s in self._slots if s.process is not None]
        for process in live:
            if process.pid is not None and process.is_alive():
                try:
                    os.kill(process.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + self.stop_timeout
        while any(p.is_alive() for p in live) and time.monotonic() < deadline:
            wait([p.sentinel for p in live if p.is_alive()], max(0.0, deadline - time.monotonic()))
        for process in live:
            if process.is_alive():
                logger.error("worker process pid %s did not stop in %.0fs; killing it", process.pid,
                             self.stop_timeout)
                process.kill()
            process.join(KILL_WAIT)
        for slot in self._slots:
            slot.process, slot.restart_at = None, None

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
                if self._stop_deadline is None and self._start(slot):
                    restarts += 1
        if self._stop_deadline is not None and now >= self._stop_deadline:
            for slot in self._slots:
                if slot.process is not None and slot.process.is_alive():
                    logger.error("worker process %d (pid %s) did not stop in %.0fs; killing it",
                                 slot.index, slot.process.pid, self.stop_timeout)
                    slot.process.kill()
            self._stop_deadline = now + KILL_WAIT
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

    def _start(self, slot: _Slot) -> bool:
        """Start ``slot``'s child; False if that failed with an ``OSError`` (a death: backoff, then again)."""
        process = self._ctx.Process(target=_child_main, args=(self.target, slot.index, os.getpid(), self.stop_timeout),
                                    name=f"venturi-worker-{slot.index}", daemon=False)
        _tracker_running()
        try:
            with stops_held():  # until the child's quiet exit is installed (see _child_main)
                if self.start_child is not None:
                    self.start_child(process)
                else:
                    process.start()
        except OSError as exc:
            delay = self._died(slot)
            logger.error("worker process %d could not be started (%s); trying again in %.1fs", slot.index, exc,
                         delay)
            return False
        slot.process, slot.started = process, time.monotonic()
        logger.info("worker process %d started (pid %s)", slot.index, process.pid)
        if self.on_start is not None and process.pid is not None:
            self.on_start(slot.index, process.pid)
        return True

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
        delay = self._died(slot, lived)
        how = f"killed by {signal.Signals(-code).name}" if code is not None and code < 0 else f"status {code}"
        logger.error("worker process %d (pid %s) died (%s) after %.1fs; restarting it in %.1fs",
                     slot.index, pid, how, lived, delay)

    def _died(self, slot: _Slot, lived: float = 0.0) -> float:
        """Count a death of ``slot`` (a quick one unless it ``lived`` ``stable_after``); schedule its restart."""
        slot.deaths = 1 if lived >= self.stable_after else slot.deaths + 1
        delay = min(self.max_backoff, self.min_backoff * 2.0 ** (slot.deaths - 1))
        slot.restart_at = time.monotonic() + delay
        return delay

    # -- signals -------------------------------------------------------------------------------
    def _install_signals(self) -> Callable[[], None]:
        if threading.current_thread() is not threading.main_thread():
            return lambda: None

        def handle(signum: int, frame: FrameType | None) -> None:
            logger.warning("%s: stopping %d worker processes", signal.Signals(signum).name, len(self.pids))
            self.stop(signum)

        previous = {sig: signal.signal(sig, handle) for sig in STOP_SIGNALS}

        def restore() -> None:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

        return restore


__all__ = ["Supervisor"]
