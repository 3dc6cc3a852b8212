"""The worker process: claim up to the free slots, run each job, persist its outcome.

Threads: the caller's thread is the producer (claims and waits); ``concurrency``
executor threads run handlers; a lease keeper renews and recovers leases; a
listener wakes the producer on ``NOTIFY``.  No transaction stays open while a
handler runs, except the handler's own ``ctx.session``.
"""

from __future__ import annotations

import logging
import os
import queue as queue_mod
import signal
import socket
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from datetime import timedelta
from types import FrameType
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import sessionmaker

from venturi_sa.errors import InvalidOption
from venturi_sa.storage import claim as claims
from venturi_sa.storage.params import ClaimedJob, ClaimParams, RecoverParams
from venturi_sa.worker.completer import Batcher, Completer
from venturi_sa.worker.context import JobContext
from venturi_sa.worker.executor import Run, process
from venturi_sa.worker.joblog import job_log
from venturi_sa.worker.leases import LeaseKeeper
from venturi_sa.worker.listener import Listener

if TYPE_CHECKING:
    from venturi_sa.queue import Queue

logger = logging.getLogger("venturi_sa.worker")
EventHook = Callable[[str, dict[str, Any]], None]


def default_worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


class Worker:
    """Claims and runs jobs of ``queue`` on ``engine``.

    ``kinds`` limits the worker to some task kinds (default: all registered);
    ``concurrency`` is the number of jobs run at once; ``poll_interval`` the
    longest idle sleep; ``listen=False`` disables LISTEN/NOTIFY (e.g. behind
    a transaction-pooling proxy) and relies on polling alone; ``grace`` is
    how long a stop waits for running jobs before releasing them.
    ``on_event(name, data)`` is called for ``claimed``, ``finished`` and
    ``idle`` (from worker threads; keep it quick).
    """

    def __init__(self, queue: Queue, engine: sa.Engine, *, kinds: Sequence[str] | None = None,
                 concurrency: int = 10, poll_interval: float = 5.0, batch_size: int = 100,
                 listen: bool = True, grace: float = 30.0, recover_interval: float = 10.0,
                 worker_id: str | None = None, on_event: EventHook | None = None,
                 batch_outcomes: bool = True) -> None:
        if concurrency < 1:
            raise InvalidOption(f"concurrency must be >= 1, got {concurrency}")
        if poll_interval <= 0:
            raise InvalidOption(f"poll_interval must be > 0, got {poll_interval}")
        self.queue = queue
        self.models = queue.models
        self.engine = engine
        self.kinds = [queue.registry.get(k).KIND for k in kinds] if kinds is not None else queue.registry.kinds
        self.concurrency = concurrency
        self.poll_interval = poll_interval
        self.batch_size = max(1, batch_size)
        self._refill = max(1, min(self.batch_size, concurrency) // 2)
        self.listen = listen
        self.grace = grace
        self.recover_interval = recover_interval
        self.worker_id = worker_id or default_worker_id()
        self.on_event = on_event
        self.batch_outcomes = batch_outcomes
        self._sessions = sessionmaker(bind=engine, expire_on_commit=False)
        self.completer = Completer(self.models, self._sessions)
        self._tasks = {k: queue.registry.get(k) for k in self.kinds}
        self._lock = threading.Lock()
        self._inflight: dict[str, Run] = {}  # claimed, outcome not yet persisted
        self._running: Counter[str] = Counter()  # handlers running, per kind (slots and caps)
        self._busy = 0
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._abort = threading.Event()
        self._halt = threading.Event()
        self._todo: queue_mod.SimpleQueue[Run | None] = queue_mod.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self.keeper: LeaseKeeper | None = None
        self.batcher: Batcher | None = None
        self.listener: Listener | None = None
        self.processed = 0

    # -- lifecycle -----------------------------------------------------------------
    def run(self) -> None:
        """Run until :meth:`stop` or SIGTERM/SIGINT; then drain within ``grace`` and release the rest."""
        restore = self._install_signals()
        self._start(listen=self.listen)
        try:
            while not self._stopping.is_set():
                self._wake.clear()
                state = self._claim_round()
                if state == "more":
                    continue
                if state == "none":
                    self._idle_wait()
                else:
                    self._wake.wait(self.poll_interval)
        finally:
            self._shutdown()
            restore()

    def run_until_idle(self) -> int:
        """Process until no job of this worker's kinds is eligible now; returns jobs processed.

        Jobs made eligible again by a pause or retry with no delay are run
        too; jobs scheduled for later are not waited for.
        """
        self._start(listen=False)
        start = self.processed
        try:
            while not self._stopping.is_set():
                self._wake.clear()
                with self._lock:
                    busy = bool(self._inflight)  # a run may commit a pause/retry during this claim
                state = self._claim_round()
                if state == "none" and not busy and not self._inflight:
                    break
                if state != "more":
                    self._wake.wait(self.poll_interval)
        finally:
            self._shutdown()
        return self.processed - start

    def stop(self, now: bool = False) -> None:
        """Stop claiming; running jobs get ``grace`` seconds (none if ``now``) before release."""
        self._stopping.set()
        if now:
            self._abort.set()
        self._wake.set()

    # -- producer ------------------------------------------------------------------
    def _claim_round(self) -> str:
        """Claim for the free slots: 'more' if a claim filled its limit, 'some', or 'none'."""
        if self.keeper is not None and not self.keeper.healthy.is_set():
            return "none"
        state = "none"
        for kinds, limit in self._claim_groups():
            try:
                with self.engine.begin() as conn:  # committed before any handler runs
                    jobs = claims.claim(self.models, conn, self._claim_params(kinds, limit))
            except SQLAlchemyError as exc:
                logger.error("claim failed: %s", exc)
                self._stopping.wait(min(self.poll_interval, 1.0))
                return "none"
            for job in jobs:
                self._dispatch(job)
            if jobs and len(jobs) == limit:
                state = "more"
            elif jobs and state == "none":
                state = "some"
        return state

    def _claim_groups(self) -> list[tuple[list[str], int]]:
        with self._lock:
            free = self.concurrency - self._busy
            running = dict(self._running)
        if free <= 0:
            return []
        limit = min(free, self.batch_size)
        uncapped = [k for k in self.kinds if self._tasks[k].concurrency is None]
        groups = [(uncapped, limit)] if uncapped else []
        for kind in self.kinds:
            cap = self._tasks[kind].concurrency
            if cap is not None and cap - running.get(kind, 0) > 0:
                groups.append(([kind], min(limit, cap - running.get(kind, 0))))
        return groups

    def _claim_params(self, kinds: list[str], limit: int) -> ClaimParams:
        with self._lock:
            limit = min(limit, self.concurrency - self._busy)
        return ClaimParams(worker_id=self.worker_id, kinds=kinds, limit=max(limit, 0),
                           leases={k: self._tasks[k].lease for k in kinds},
                           default_lease=timedelta(seconds=60))

    def _idle_wait(self) -> None:
        timeout = self.poll_interval
        with self._lock:
            full = self._busy >= self.concurrency
        if not full:
            self._emit("idle", {})
            try:
                with self.engine.connect() as conn:
                    soonest = claims.seconds_until_visible(self.models, conn, self.kinds)
                if soonest is not None:
                    timeout = min(timeout, soonest + 0.005)
            except SQLAlchemyError as exc:
                logger.debug("soonest-visible lookup failed: %s", exc)
        self._wake.wait(timeout)

    def _dispatch(self, job: ClaimedJob) -> None:
        ctx = JobContext(job, job.carry, self._sessions, job_log(job))
        run = Run(job=job, ctx=ctx)
        with self._lock:
            self._inflight[job.id] = run
            self._running[job.kind] += 1
            self._busy += 1
        self._emit("claimed", {"job_id": job.id, "kind": job.kind, "run_count": job.run_count,
                               "waited": job.waited, "queue": self.models.prefix})
        self._todo.put(run)

    # -- executors -----------------------------------------------------------------
    def _executor_loop(self) -> None:
        while True:
            run = self._todo.get()
            if run is None:
                return
            batched, recorded = False, False
            try:
                process(run, self.queue.registry)
                if run.released:
                    session = run.ctx.take_session()
                    if session is not None:
                        session.close()  # released at shutdown: its work is discarded
                elif self.batcher is not None and not run.ctx.session_used:
                    self._slot_free(run)  # the batcher persists it; this thread is free
                    self.batcher.submit(run)
                    batched = True
                else:
                    recorded = self.completer.persist(run)
            except BaseException:  # noqa: BLE001 - never lose a slot
                logger.exception("unexpected error finishing job %s", run.job.id)
            finally:
                self._slot_free(run)
                if not batched:
                    self._finished(run, recorded)

    def _slot_free(self, run: Run) -> None:
        """The handler is done: its slot (and kind cap) can take another job.

        The producer is woken once enough slots are free for a worthwhile
        batch (half a batch), when the worker runs dry, or when a capped kind
        has room again, not for every finished job: one claim round trip
        then fills many slots.
        """
        with self._lock:
            if run.slot_freed:
                return
            run.slot_freed = True
            self._running[run.job.kind] -= 1
            self._busy -= 1
            free = self.concurrency - self._busy
        capped = run.job.kind in self._tasks and self._tasks[run.job.kind].concurrency is not None
        if free >= self._refill or free == self.concurrency or capped:
            self._wake.set()

    def _finished(self, run: Run, recorded: bool = True) -> None:
        """The outcome is persisted (or given up on): the run leaves the worker."""
        with self._lock:
            if self._inflight.pop(run.job.id, None) is not None:
                self.processed += 1
        outcome = run.params.outcome.value if run.params else None
        self._emit("finished", {"job_id": run.job.id, "kind": run.job.kind, "outcome": outcome,
                                "recorded": recorded, "duration": run.duration, "queue": self.models.prefix})
        if not self._inflight:
            self._wake.set()  # run_until_idle and shutdown wait for the last outcome

    def _held(self) -> dict[timedelta, list[tuple[str, int]]]:
        by_lease: dict[timedelta, list[tuple[str, int]]] = {}
        with self._lock:
            for run in self._inflight.values():
                lease = self._tasks[run.job.kind].lease if run.job.kind in self._tasks else timedelta(60)
                by_lease.setdefault(lease, []).append((run.job.id, run.job.run_count))
        return by_lease

    # -- start and shutdown ----------------------------------------------------------
    def _start(self, listen: bool) -> None:
        self._stopping.clear()
        self._abort.clear()
        self._halt.clear()
        self._threads = [threading.Thread(target=self._executor_loop, name=f"venturi-exec-{i}", daemon=True)
                         for i in range(self.concurrency)]
        for thread in self._threads:
            thread.start()
        if self.batch_outcomes:
            self.batcher = Batcher(self.models, self.engine, self._finished)
            self.batcher.start()
        shortest = min((self._tasks[k].lease for k in self.kinds), default=timedelta(seconds=60))
        self.keeper = LeaseKeeper(
            self.models, self._sessions, self.worker_id, self._held,
            RecoverParams(max_failures={k: t.max_failures for k, t in self._tasks.items()}),
            renew_every=max(0.2, shortest.total_seconds() / 3), recover_every=self.recover_interval,
            stopping=self._halt, wake=self._wake,
        )
        self.keeper.start()
        if listen:
            self.listener = Listener(self.engine, self.models.names.channel, self._wake, self._stopping)
            self.listener.start()
        logger.info("worker %s started: kinds=%s concurrency=%d listen=%s", self.worker_id,
                    ",".join(self.kinds), self.concurrency, listen)

    def _shutdown(self) -> None:
        self._stopping.set()
        deadline = time.monotonic() + (0 if self._abort.is_set() else self.grace)
        while self._inflight and time.monotonic() < deadline and not self._abort.is_set():
            self._wake.wait(min(0.1, max(0.0, deadline - time.monotonic())))
            self._wake.clear()
        with self._lock:
            leftover = [run for run in self._inflight.values() if not run.slot_freed]
        for run in leftover:
            run.released = True
            if self.completer.release(run, f"released by {self.worker_id} at shutdown"):
                logger.warning("released job %s (%s) still running at shutdown", run.job.id, run.job.kind)
        for _ in self._threads:
            self._todo.put(None)
        if self.batcher is not None:
            self.batcher.close()
        self._halt.set()
        for thread in [*self._threads, self.batcher, self.keeper, self.listener]:
            if thread is not None and thread.is_alive() and not leftover:
                thread.join(timeout=5)
        self.listener = None
        self.batcher = None
        logger.info("worker %s stopped", self.worker_id)

    def _install_signals(self) -> Callable[[], None]:
        if threading.current_thread() is not threading.main_thread():
            return lambda: None

        def handle(signum: int, frame: FrameType | None) -> None:
            first = not self._stopping.is_set()
            logger.warning("%s: %s", signal.Signals(signum).name,
                           "stopping after running jobs (again to stop now)" if first else "stopping now")
            self.stop(now=not first)

        previous = {sig: signal.signal(sig, handle) for sig in (signal.SIGTERM, signal.SIGINT)}

        def restore() -> None:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

        return restore

    def _emit(self, name: str, data: dict[str, Any]) -> None:
        if self.on_event is not None:
            try:
                self.on_event(name, data)
            except Exception:  # noqa: BLE001 - a broken hook must not stop the worker
                logger.exception("on_event hook failed")

