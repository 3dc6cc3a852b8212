"""Starting and stopping a worker: schema check, threads, signals, drain, release, joins.

Start refuses an unmigrated queue (``SchemaNotMigrated``) before any thread
exists.  A server that is starting, stopping or unreachable at start, or a
transient error during the schema check (its connection dropped, a lock
timeout), is waited for and retried, for at most the worker's
``connect_timeout`` (:func:`wait_for_database`); wrong credentials, an unknown
database or a schema problem raise at once.  Everything after the check
retries on its own (the claim loop, the lease keeper, the schedules'
reconcile in the firer).  Stop: no new claims; running jobs get the grace period; then every
run still queued or running is released (``released``, no failure counted;
a queued run's handler never starts; a running ``async def`` handler is
cancelled and waited for before its release is written), every outcome
already handed to the batcher is flushed, and the threads are joined.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from types import FrameType
from typing import TYPE_CHECKING, TypeVar

import sqlalchemy as sa
from sqlalchemy.exc import SQLAlchemyError

import alembic_venturi
from venturi_sa.binds import is_async_engine
from venturi_sa.errors import VenturiError
from venturi_sa.storage.faults import is_retryable_at_start, is_unavailable
from venturi_sa.worker.completer import Completer
from venturi_sa.worker.connections import Connections
from venturi_sa.worker.executor_threads import Executors
from venturi_sa.worker.inflight import InFlight
from venturi_sa.worker.lease_keeper import LeaseKeeper
from venturi_sa.worker.listener import Listener, LoopListener, WorkerListener
from venturi_sa.worker.run import Run

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncEngine

logger = logging.getLogger("venturi_sa.worker")
JOIN_TIMEOUT = 10.0
CONNECT_TIMEOUT = 60.0  # seconds a starting worker waits for an unavailable server (``connect_timeout``)
T = TypeVar("T")


class DatabaseUnavailable(VenturiError):
    """Start-up kept failing for the whole start-up wait: the server stayed unavailable, or transient errors went on."""


def error_line(exc: BaseException) -> str:
    """The first line of a database error's message, whitespace folded (driver text, no SQLAlchemy trailer)."""
    text = str(getattr(exc, "orig", None) or exc).strip()
    return " ".join(text.splitlines()[0].split()) if text else type(exc).__name__


def wait_for_database(attempt: Callable[[], T], *, timeout: float, stopping: threading.Event | None = None,
                      max_backoff: float = 5.0) -> T | None:
    """``attempt()``, retried while it fails on an unavailable server or a transient error; its result.

    An error that says the server is starting, stopping or unreachable, or a
    transient one under a statement of ``attempt`` (a dropped connection, a
    lock timeout, a deadlock:
    :func:`~venturi_sa.storage.faults.is_retryable_at_start`) is logged once
    at ERROR and ``attempt`` is retried with a backoff from 0.25 s doubling
    up to ``max_backoff``; after ``timeout`` seconds ``DatabaseUnavailable``
    (from the last error) is raised.  Any other error (wrong credentials, an
    unknown database, a missing privilege) is raised at once, as is anything
    that is not a database error (``SchemaNotMigrated``).  None if
    ``stopping`` was set while waiting.
    """
    stopping = stopping if stopping is not None else threading.Event()
    deadline, delay, logged = time.monotonic() + timeout, 0.25, False
    while True:
        try:
            return attempt()
        except SQLAlchemyError as exc:
            if not is_retryable_at_start(exc):
                raise
            unavailable = is_unavailable(exc)
            left = deadline - time.monotonic()
            if left <= 0:
                what = "the database is still unavailable" if unavailable else "start-up still fails"
                raise DatabaseUnavailable(f"{what} after {timeout:g}s: {error_line(exc)}") from exc
            if not logged:
                if unavailable:
                    logger.error("cannot reach the database at start (%s); waiting up to %gs for it",
                                 error_line(exc), timeout)
                else:
                    logger.error("a transient database error at start (%s); trying again, waiting up to %gs",
                                 error_line(exc), timeout)
                logged = True
        if stopping.wait(min(delay, max(left, 0.0))):
            return None
        delay = min(delay * 2, max_backoff)


def check_schema(conns: Connections, prefix: str, stopping: threading.Event, max_backoff: float = 5.0,
                 connect_timeout: float = CONNECT_TIMEOUT) -> bool:
    """Raise ``SchemaNotMigrated`` unless queue ``prefix``'s tables are at this venturi's head.

    While the server is starting, stopping or unreachable, or when a
    transient error drops the check (its connection terminated, a lock
    timeout), waits and checks again (:func:`wait_for_database`: logged once,
    at most ``connect_timeout`` seconds, then ``DatabaseUnavailable``); any
    other database error is raised at once.  Returns False if ``stopping`` was set meanwhile.
    """
    def check() -> bool:
        conns.connect(lambda conn: alembic_venturi.check_current(conn, prefix))
        return True

    return wait_for_database(check, timeout=connect_timeout, stopping=stopping, max_backoff=max_backoff) is True


def listener(engine: sa.Engine | AsyncEngine, channel: str, wake: threading.Event, stopping: threading.Event,
             listen: bool, nudge: threading.Event | None = None) -> WorkerListener | None:
    """The worker's LISTEN part (None without ``listen``): a thread, or a task on the worker loop.

    Either sets ``wake`` on every notification and ``nudge`` on a cancel one.
    """
    if not listen:
        return None
    if is_async_engine(engine):
        return LoopListener(engine, channel, wake, nudge=nudge)
    assert isinstance(engine, sa.Engine)
    return Listener(engine, channel, wake, stopping, nudge=nudge)


@dataclass
class Threads:
    """The running parts of a started worker."""

    executors: Executors
    keeper: LeaseKeeper
    completer: Completer
    listener: WorkerListener | None = None
    firer: threading.Thread | None = None  # venturi_sa.periodic.Firer: reconciles, then fires schedules
    owed: threading.Thread | None = None  # venturi_sa.worker.owed_calls.OwedCaller: makes owed on_dead calls
    archiver: threading.Thread | None = None  # venturi_sa.worker.archiver.Archiver: moves terminal jobs

    def start(self) -> None:
        self.executors.start()
        self.completer.start()
        self.keeper.start()
        if self.listener is not None:
            self.listener.start()
        if self.firer is not None:
            self.firer.start()
        if self.owed is not None:
            self.owed.start()
        if self.archiver is not None:
            self.archiver.start()


def shutdown(threads: Threads, inflight: InFlight, *, worker_id: str, grace: float,
             flush_timeout: float, abort: threading.Event, halt: threading.Event, wake: threading.Event,
             released: Callable[[Run, bool], None]) -> None:
    """Drain within ``grace`` (none if ``abort``), release the rest, flush outcomes, join threads.

    Only runs whose handler has not returned are released; a run whose
    outcome is decided (handed to the batch writer, or being written in its
    session) is written, and waited for up to ``flush_timeout``.
    ``released(run, recorded)`` is called for each run given back.
    """
    deadline = time.monotonic() + (0.0 if abort.is_set() else grace)
    while len(inflight) and time.monotonic() < deadline and not abort.is_set():
        inflight.wait_empty(min(0.1, max(0.0, deadline - time.monotonic())))
    leftover = inflight.release_unfinished()
    _end_async_handlers(leftover, JOIN_TIMEOUT)
    for run in leftover:
        recorded = threads.completer.release(run, f"released by {worker_id} at shutdown")
        if recorded:
            logger.warning("released job %s (%s) run %d, still queued or running at shutdown",
                           run.job.id, run.job.kind, run.job.run_count)
        released(run, recorded)
    threads.executors.close(timeout=0.0 if leftover else JOIN_TIMEOUT)
    flushed = time.monotonic() + flush_timeout
    threads.completer.close(timeout=flush_timeout)
    if not inflight.wait_empty(flushed - time.monotonic()):  # outcomes still being written in their sessions
        logger.error("%d outcomes were still being written at the end of the stop", len(inflight))
    halt.set()
    wake.set()
    for thread in (threads.keeper, threads.listener, threads.firer, threads.owed, threads.archiver):
        if thread is not None and thread.is_alive():
            thread.join(timeout=JOIN_TIMEOUT)


def _end_async_handlers(runs: list[Run], timeout: float) -> None:
    """Cancel the ``async def`` handlers among ``runs`` and wait up to ``timeout`` for their tasks to end.

    Their release is written after that, so a handler's ``except
    CancelledError``/``finally`` code never runs beside the next claim of its
    job.  A sync handler cannot be interrupted: its release is written while
    it still runs, and what it returns is discarded.
    """
    tasks = [run.running for run in runs if run.running is not None]
    for task in tasks:
        task.cancel()
    deadline = time.monotonic() + timeout
    for task in tasks:
        if not task.wait(max(0.0, deadline - time.monotonic())):
            logger.error("an async handler did not end within %gs of its cancel at shutdown", timeout)


def install_signals(stop: Callable[[bool], None], stopping: threading.Event) -> Callable[[], None]:
    """SIGTERM/SIGINT: the first stops after running jobs, a second stops at once.

    Returns a function restoring the previous handlers (a no-op off the main thread).
    """
    if threading.current_thread() is not threading.main_thread():
        return lambda: None

    def handle(signum: int, frame: FrameType | None) -> None:
        first = not stopping.is_set()
        logger.warning("%s: %s", signal.Signals(signum).name,
                       "stopping after running jobs (again to stop now)" if first else "stopping now")
        stop(not first)

    previous = {sig: signal.signal(sig, handle) for sig in (signal.SIGTERM, signal.SIGINT)}

    def restore() -> None:
        for sig, handler in previous.items():
            signal.signal(sig, handler)

    return restore
