"""The worker: a producer that claims, a run pipeline that runs, a completer that persists.

Threads: the caller's thread is the producer (claims and waits, see
:mod:`~venturi_sa.worker.producer`); ``concurrency`` executor threads take
each run through its lifecycle (:mod:`~venturi_sa.worker.pipeline`, the one
file to read); the completer's batch writer records most outcomes
(:mod:`~venturi_sa.worker.completer`); a lease keeper renews and recovers
leases and delivers cancels; a listener wakes the producer on ``NOTIFY``;
a firer fires schedules; and a thread makes the ``on_dead`` calls owed to
this worker's kinds (and deletes the owed rows of its kinds without one).  Start and stop are in
:mod:`~venturi_sa.worker.lifecycle`.  No transaction stays open while a
handler runs, except the handler's own ``ctx.session``; every session the
worker opens runs at READ COMMITTED, whatever the engine's default.
``async def`` handlers run on the process's worker loop
(:mod:`~venturi_sa.worker.loop`), awaited from the executor thread holding
their slot.  The worker's own statements go through a connection runner
(:mod:`~venturi_sa.worker.connections`): on a sync engine in the calling thread,
on an async engine through the async driver on the worker loop.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlalchemy.orm import Session, sessionmaker

from venturi_sa.binds import is_async_engine, require_worker_engine
from venturi_sa.periodic.firing import Firer
from venturi_sa.states import Outcome
from venturi_sa.storage.backend import backend_for
from venturi_sa.storage.params import ClaimedJob, RecoverParams
from venturi_sa.task import declared_limits_of
from venturi_sa.worker import lifecycle
from venturi_sa.worker.archiver import Archiver
from venturi_sa.worker.checkpoint import Checkpointer
from venturi_sa.worker.completer import Completer
from venturi_sa.worker.connections import HeldConnections, WorkerEngines
from venturi_sa.worker.context import JobContext
from venturi_sa.worker.executor_threads import Executors
from venturi_sa.worker.inflight import InFlight
from venturi_sa.worker.lease_keeper import LeaseKeeper
from venturi_sa.worker.listener import WorkerListener
from venturi_sa.worker.loop import worker_loop
from venturi_sa.worker.owed_calls import OwedCaller
from venturi_sa.worker.pipeline import RunPipeline
from venturi_sa.worker.producer import DEFAULT_LEASE, Producer
from venturi_sa.worker.run import Run
from venturi_sa.worker.worker_options import WorkerKeywords, WorkerOptions

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker
    from typing_extensions import Unpack

    from venturi_sa.queue import Queue

logger = logging.getLogger("venturi_sa.worker")
ISOLATION = "READ COMMITTED"


def default_worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


class Worker:
    """Claims and runs jobs of ``queue`` on ``engine``.

    The options come as keywords or as one ``options=``
    :class:`~venturi_sa.WorkerOptions` (a keyword beside ``options=`` raises
    ``InvalidOption`` naming it); ``self.options`` is the object either way.
    ``kinds`` limits the worker to some task kinds (default: all registered);
    ``concurrency`` is the number of jobs run at once; ``poll_interval`` the
    longest idle sleep; ``fetch_cooldown`` the longest a freed slot waits
    for a claim while more work is eligible; ``max_backlog`` how many
    finished runs may wait for their outcome write before the worker stops
    claiming (default ``max(4 * concurrency, 100)``); ``listen=False`` disables
    LISTEN/NOTIFY (e.g. behind a transaction-pooling proxy) and relies on
    polling alone; ``grace`` is how long a stop waits for running jobs
    before releasing them; ``connect_timeout`` how long start waits for a
    server that is starting, stopping or unreachable (then
    ``DatabaseUnavailable``).  ``on_event(name, data)`` is called for
    ``claimed``, ``finished``, ``idle`` and ``lost_before_start`` (a run not
    started because its lease may have run out) from worker threads; keep it quick.
    Expired leases are recovered for every kind of the queue's registry,
    each against its own ``max_failures``.  :meth:`run` also moves jobs that
    finished more than the queue's ``archive_after`` ago to the archive,
    every ``recover_interval`` seconds (:mod:`~venturi_sa.worker.archiver`).

    ``engine`` is an ``Engine`` or an ``AsyncEngine``; the worker's claims,
    outcomes, lease renewals and LISTEN go through its driver (an async one
    on the worker's event loop).  ``ctx.session`` runs on a sync engine and
    ``ctx.session_async`` on an async one; the flavour not given is derived
    from the same URL on first use (see :mod:`~venturi_sa.worker.connections`)
    unless given as ``sync_engine=`` / ``async_engine=``.  On an async
    engine, an ``async def`` handler that blocks the loop also delays the
    worker's own statements (its lease renewals).  ``session_class`` /
    ``async_session_class`` are the classes of ``ctx.session`` / ``ctx.session_async`` (default: the queue's).

    ``on_start(worker)`` / ``on_stop(worker)`` run in this process when the
    worker starts (before its first claim) and once it has stopped;
    ``around_run(ctx)`` returns a context manager entered around each call
    of the application's code for a run (a Flask app context, a tracing
    span); each takes one callable or a list (see :mod:`~venturi_sa.run_hooks`).
    """

    def __init__(self, queue: Queue, engine: sa.Engine | AsyncEngine, options: WorkerOptions | None = None, *,
                 sync_engine: sa.Engine | None = None, async_engine: AsyncEngine | None = None,
                 **keywords: Unpack[WorkerKeywords]) -> None:
        self.options = opts = WorkerOptions.merged(options, keywords)
        concurrency = opts.concurrency
        self.queue = queue
        self.hooks = queue.run_hooks + opts.hooks()
        self.models = queue.models
        self.backend = backend_for(queue.models)
        self.engines = WorkerEngines(require_worker_engine(engine), sync_engine=sync_engine,
                                     async_engine=async_engine, pool_size=concurrency + 4)
        self.engine = self.engines.own  # the worker's own statements (claims, outcomes, leases, LISTEN)
        self._conns = self.engines.connections(isolation_level=ISOLATION)
        # The claim loop and the batch writer run a transaction every few milliseconds: each keeps a connection.
        self._claim_conns = self.engines.held(isolation_level=ISOLATION)
        self._batch_conns = self.engines.held(isolation_level=ISOLATION)
        self.session_class = opts.session_class if opts.session_class is not None else queue.session_class
        self._async_session_class = opts.async_session_class
        kinds = opts.kinds
        self.kinds = [queue.registry.get(k).KIND for k in kinds] if kinds is not None else queue.registry.kinds
        self.concurrency = concurrency
        self.poll_interval = opts.poll_interval
        self.batch_size = max(1, opts.batch_size)
        self.listen = opts.listen
        self.grace = opts.grace
        self.recover_interval = opts.recover_interval
        self.connect_timeout = opts.connect_timeout
        self.worker_id = opts.worker_id or default_worker_id()
        self.on_event = opts.on_event
        self.batch_outcomes = opts.batch_outcomes
        self.fetch_cooldown = opts.fetch_cooldown
        self.max_backlog = opts.max_backlog if opts.max_backlog is not None else max(4 * concurrency, 100)
        self._sessions: Callable[[], Session] = self._open_session
        if isinstance(self.engine, sa.Engine):
            self._sessions = sessionmaker(bind=self.engine.execution_options(isolation_level=ISOLATION),
                                          class_=self.session_class, expire_on_commit=False)
        self._async_sessions: async_sessionmaker[AsyncSession] | None = None
        self._sync_sessions: sessionmaker[Session] | None = None
        self._lock = threading.Lock()
        self._tasks = {k: queue.registry.get(k) for k in self.kinds}
        self._leases = {k: t.lease for k, t in self._tasks.items()}
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._abort = threading.Event()
        self._halt = threading.Event()
        self._until_idle = False
        self._healthy = threading.Event()  # cleared by the lease keeper while the database is unreachable
        self.inflight = InFlight(concurrency, {k: t.concurrency for k, t in self._tasks.items()},
                                 self._leases, self._slot_freed)
        self.completer = Completer(self.backend, self._conns, self._leases, self._abort, self._finished_many,
                                   batch=self.batch_outcomes, max_backlog=self.max_backlog,
                                   batch_conns=self._batch_conns)
        self.pipeline = RunPipeline(queue.registry, self.inflight, self.completer, interrupted=self.stop,
                                    lost=self._lost_before_start)
        self.producer = Producer(
            self.backend, self._claim_conns, self.worker_id, self.kinds, self._leases, self.inflight, self._dispatch,
            batch_size=self.batch_size, poll_interval=self.poll_interval, fetch_cooldown=self.fetch_cooldown,
            healthy=self._healthy, wake=self._wake, stopping=self._stopping,
            on_idle=lambda: self._emit("idle", {}),
            throttles={k: t.throttle for k, t in self._tasks.items() if t.throttle is not None})
        self.producer.limits = declared_limits_of(self._tasks.values())
        self._threads: lifecycle.Threads | None = None

    # -- public --------------------------------------------------------------------------
    def run(self) -> None:
        """Run until :meth:`stop` or SIGTERM/SIGINT; then drain within ``grace`` and release the rest.

        Raises ``SchemaNotMigrated`` at once if the queue's tables are not at
        this venturi's version.
        """
        restore = lifecycle.install_signals(lambda now: self.stop(now=now), self._stopping)
        try:
            if not self._start(listen=self.listen):
                return
            try:
                self.producer.run()
            finally:
                self._shutdown()
        finally:
            restore()

    def run_until_idle(self) -> int:
        """Process until no job of this worker's kinds is eligible now; returns jobs processed.

        Jobs made eligible again by a pause or retry with no delay are run
        too; jobs scheduled for later are not waited for.  Raises
        ``SchemaNotMigrated`` if the queue's tables are not migrated.
        """
        if not self._start(listen=False, fire=False):
            return 0
        self._until_idle = True
        start = self.inflight.processed
        try:
            self.producer.run_until_idle()
        finally:
            self._until_idle = False
            self._shutdown()
        return self.inflight.processed - start

    def stop(self, now: bool = False) -> None:
        """Stop claiming; running jobs get ``grace`` seconds (none if ``now``) before release.

        With ``now``, claimed runs that have not started are released
        without running their handlers.
        """
        self._stopping.set()
        if now:
            self._abort.set()
        self._wake.set()

    @property
    def processed(self) -> int:
        """Runs whose outcome this worker persisted (or gave up on), since it was built."""
        return self.inflight.processed

    @property
    def listener(self) -> WorkerListener | None:
        """The LISTEN thread while the worker runs with ``listen=True``, else None."""
        return self._threads.listener if self._threads is not None else None

    # -- what the parts report back: claims, finished runs, freed slots ------------------------
    def _dispatch(self, jobs: Sequence[ClaimedJob], sent: float) -> None:
        """The runs of one claim (sent at monotonic ``sent``): in flight, then queued for the executors."""
        runs = []
        sessions, async_sessions, hooks = self._sessions, self._open_async_session, self.hooks
        backend, begin, tasks, bound = self.backend, self._conns.begin, self._tasks, self.queue.max_payload_bytes
        for job in jobs:
            task_type = tasks.get(job.kind)
            checkpointer = Checkpointer(job.fence, task_type.carry_schema if task_type is not None else None,
                                        backend, begin)
            ctx = JobContext(job, job.carry, sessions, None, async_sessions,  # its logger is made on first use
                             max_payload_bytes=bound, checkpointer=checkpointer)
            runs.append(Run(job=job, ctx=ctx, hooks=hooks))
        self.inflight.add_many(runs, sent)
        assert self._threads is not None
        if self.on_event is not None:
            for run in runs:
                job = run.job
                self._emit("claimed", {"job_id": job.id, "kind": job.kind, "run_count": job.run_count,
                                       "waited": job.waited, "queue": self.models.prefix})
        self._threads.executors.put_many(runs)  # one hand-off per claim (worker/executor_threads.py)

    @property
    def async_session_class(self) -> type[AsyncSession]:  # the queue's unless given: resolved on first use
        return self._async_session_class or self.queue.async_session_class

    def _open_session(self) -> Session:
        """``ctx.session`` of a worker on an async engine: on the sync sibling engine, made on first use."""
        with self._lock:
            if self._sync_sessions is None:
                bind = self.engines.get_sync().execution_options(isolation_level=ISOLATION)
                self._sync_sessions = sessionmaker(bind=bind, class_=self.session_class, expire_on_commit=False)
        return self._sync_sessions()

    def _open_async_session(self) -> AsyncSession:
        """``ctx.session_async``: a fresh AsyncSession at READ COMMITTED (``AsyncDriverMissing`` if none)."""
        with self._lock:
            if self._async_sessions is None:
                bind = self.engines.get_async().execution_options(isolation_level=ISOLATION)
                from sqlalchemy.ext.asyncio import async_sessionmaker  # needs greenlet
                self._async_sessions = async_sessionmaker(bind=bind, class_=self.async_session_class,
                                                          expire_on_commit=False)
        return self._async_sessions()

    def _released(self, run: Run, recorded: bool) -> None:
        """A run given back at shutdown (its async handler, if any, was cancelled and waited for first)."""
        self._emit_finished(run, Outcome.RELEASED.value, recorded)

    def _lost_before_start(self, run: Run, overdue: float) -> None:
        self._emit("lost_before_start", {"job_id": run.job.id, "kind": run.job.kind, "run_count": run.job.run_count,
                                         "overdue": overdue, "queue": self.models.prefix})

    def _slot_freed(self, free: int, kind: str) -> None:
        self.producer.slot_freed(free, kind)

    def _finished_many(self, results: Sequence[tuple[Run, bool]]) -> None:
        """Runs whose outcomes were persisted (or given up on) leave the worker (one lock acquisition)."""
        left, _ = self.inflight.done_many([run for run, _ in results])
        if self.on_event is not None:
            for run, recorded in results:
                # what the write recorded (a stored cancel may have made it dead), else what the run decided
                outcome = run.recorded if recorded and run.recorded else run.params.outcome if run.params else None
                self._emit_finished(run, outcome.value if outcome is not None else None, recorded)
        if left == 0 or (self._until_idle and not self.producer.hungry):
            self._wake.set()  # run_until_idle and shutdown wait for outcomes

    def _emit_finished(self, run: Run, outcome: str | None, recorded: bool) -> None:
        self._emit("finished", {"job_id": run.job.id, "kind": run.job.kind, "outcome": outcome,
                                "recorded": recorded, "duration": run.duration, "queue": self.models.prefix})

    def _firer(self) -> Firer | None:
        """The schedule firer (sessions on the sync engine); an async-only worker fires none it does not declare.

        A worker on an ``AsyncEngine`` whose queue declares no schedules starts
        no firer, so it needs no sync driver (and does not reconcile stored
        schedules away: a sync worker of the queue, or one that declares them, does).
        """
        if self.engines.is_async and not len(self.queue.schedules):
            return None
        return Firer(self.queue, self.engines.get_sync(), self._stopping, poll_interval=self.poll_interval,
                     on_event=self._emit)

    def _owed_caller(self) -> OwedCaller | None:
        """The thread making the owed ``on_dead`` calls of this worker's kinds (and dropping those of kinds without
        ``on_dead``: nobody else would, and a job with an owed row is never archived)."""
        if not self.kinds:
            return None
        sessions = self._sessions if isinstance(self.engine, sa.Engine) else self._open_session
        return OwedCaller(self.models, self.queue.registry, list(self.kinds), sessions, every=self.recover_interval,
                          stopping=self._halt)

    def _archiver(self) -> Archiver | None:
        """The thread moving terminal jobs to the archive (on the sync engine), unless ``archive_after`` is None."""
        if self.queue.archive_after is None:
            return None
        return Archiver(self.models, self.engines.get_sync, self.queue.archive_after, every=self.recover_interval,
                        stopping=self._halt)

    # -- start and stop ------------------------------------------------------------------------
    def _start(self, listen: bool, fire: bool = True) -> bool:
        for event in (self._stopping, self._abort, self._halt):
            event.clear()
        if not lifecycle.check_schema(self._conns, self.models.prefix, self._stopping,
                                      connect_timeout=self.connect_timeout):
            return False
        self.hooks.started(self)
        self._healthy.set()
        keeper = LeaseKeeper(
            self.backend, self._conns, self.worker_id, self.inflight,
            RecoverParams(max_failures={t.KIND: t.max_failures for t in self.queue.registry}),
            renew_every=max(0.2, min(self._leases.values(), default=DEFAULT_LEASE).total_seconds() / 3),
            recover_every=self.recover_interval, stopping=self._halt, wake=self._wake, healthy=self._healthy)
        executors = Executors(self.concurrency, self.pipeline.handle)
        listener = lifecycle.listener(self.engine, self.models.names.channel, self._wake, self._stopping,
                                      listen, nudge=keeper.nudge)  # a cancel NOTIFY makes the keeper renew now
        self._threads = lifecycle.Threads(executors=executors, keeper=keeper, completer=self.completer,
                                          listener=listener,
                                          firer=self._firer() if fire else None, owed=self._owed_caller(),
                                          archiver=self._archiver() if fire else None)
        self._threads.start()
        logger.info("worker %s started: kinds=%s concurrency=%d listen=%s", self.worker_id,
                    ",".join(self.kinds), self.concurrency, listen)
        return True

    def _shutdown(self) -> None:
        self._stopping.set()
        assert self._threads is not None
        longest = max(self._leases.values(), default=DEFAULT_LEASE).total_seconds()
        lifecycle.shutdown(self._threads, self.inflight, worker_id=self.worker_id,
                           grace=self.grace, flush_timeout=longest + lifecycle.JOIN_TIMEOUT,
                           abort=self._abort, halt=self._halt, wake=self._wake,
                           released=self._released)
        for held in (self._claim_conns, self._batch_conns):
            if isinstance(held, HeldConnections):
                held.close()  # back to the pool (a batch writer still writing gives it back when done)
        self._dispose_derived()
        self.hooks.stopped(self)
        logger.info("worker %s stopped", self.worker_id)

    def _dispose_derived(self) -> None:
        """Close the pooled connections of the engines this worker derived (they stay usable).

        The async engine's pooled connections are closed too once the worker
        ran statements on it (an async-engine worker always does; a sync one
        once a handler used ``ctx.session_async``): they were opened on the
        worker's loop and belong to it (which is why a worker needs an
        AsyncEngine of its own).
        """
        engines = self.engines.derived()
        used = self.engines.async_engine if self._async_sessions is not None or self.engines.is_async else None
        if used is not None and used not in engines:
            engines.append(used)
        for engine in engines:
            try:
                if is_async_engine(engine):
                    worker_loop().run(engine.dispose())
                else:
                    engine.dispose()
            except Exception:  # noqa: BLE001 - closing connections must not fail a stop
                logger.debug("disposing a derived engine failed", exc_info=True)

    def _emit(self, name: str, data: dict[str, Any]) -> None:
        if self.on_event is not None:
            try:
                self.on_event(name, data)
            except Exception:  # noqa: BLE001 - a broken hook must not stop the worker
                logger.exception("on_event hook failed")


__all__ = ["Worker", "default_worker_id"]
