"""The worker's parts wired to a :class:`~venturi_sa.storage.memory.MemoryBackend` (no database).

What the ``Worker`` facade does when it builds its parts, minus engines,
threads and ``ctx.session``: the producer, the in-flight registry, the
completer and the pipeline share one memory store, which is also their
``Transactions``.  A handler's ``ctx.session`` fails the test (it needs a
real engine: see ``memory_session``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from sqlalchemy.exc import OperationalError

from venturi_sa.storage.memory import MemoryBackend
from venturi_sa.storage.params import ClaimedJob
from venturi_sa.task import Registry, Task
from venturi_sa.worker.checkpoint import Checkpointer
from venturi_sa.worker.completer import Completer
from venturi_sa.worker.context import JobContext
from venturi_sa.worker.inflight import InFlight
from venturi_sa.worker.pipeline import RunPipeline
from venturi_sa.worker.producer import Producer
from venturi_sa.worker.run import Run

WORKER = "host:1"


def memory_session() -> Any:
    pytest.fail("ctx.session needs a real engine: the memory backend has no SQLAlchemy session")


class Clock:
    """A store clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = datetime(2030, 1, 1, tzinfo=timezone.utc)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> None:
        self.now += timedelta(**delta)


class Flaky:
    """The store's ``Transactions``, failing the first ``failures`` transactions as a dropped connection would."""

    def __init__(self, store: MemoryBackend, failures: int = 0) -> None:
        self.store, self.failures, self.attempts = store, failures, 0

    def fail_next(self, failures: int) -> None:
        self.failures, self.attempts = failures, 0

    def begin(self, fn: Callable[[Any], Any]) -> Any:
        self.attempts += 1
        if self.attempts <= self.failures:
            raise OperationalError("COMMIT", {}, ConnectionError("server closed the connection unexpectedly"))
        return self.store.begin(fn)

    connect = begin


class Parts:
    """A memory store and the worker parts around it."""

    def __init__(self, tasks: Sequence[type[Task]], *, concurrency: int = 4, caps: Mapping[str, int] | None = None,
                 batch: bool = False, clock: Clock | None = None) -> None:
        self.clock = clock or Clock()
        self.store = MemoryBackend(clock=self.clock)
        self.registry = Registry(list(tasks))
        self.finished: list[tuple[Run, bool]] = []
        self.freed: list[tuple[int, str]] = []
        self.inflight = InFlight(concurrency, dict(caps or {}), {}, lambda free, kind: self.freed.append((free, kind)))
        self.transactions = Flaky(self.store)  # fails no transaction unless a test says so
        self.completer = Completer(self.store, self.transactions, {}, threading.Event(), self._done, batch=batch)
        self.lost: list[tuple[Run, float]] = []  # runs dropped before their start, and by how much overdue
        self.pipeline = RunPipeline(self.registry, self.inflight, self.completer, lambda: None,
                                    lost=lambda run, overdue: self.lost.append((run, overdue)))
        self.dispatched: list[Run] = []
        self.wake, self.stopping, self.healthy = threading.Event(), threading.Event(), threading.Event()
        self.healthy.set()
        self.producer = Producer(self.store, self.transactions, WORKER, self.registry.kinds, {}, self.inflight,
                                 self.dispatch, batch_size=10, poll_interval=0.05, fetch_cooldown=0.0,
                                 healthy=self.healthy, wake=self.wake, stopping=self.stopping,
                                 on_idle=lambda: None)

    def _done(self, results: list[tuple[Run, bool]]) -> None:
        self.finished.extend(results)
        for run, _ in results:
            self.inflight.done(run)

    def run_of(self, job: ClaimedJob) -> Run:
        """A run as the worker builds it: its context checkpoints through the store."""
        checkpointer = Checkpointer(job.fence, None, self.store, self.transactions.begin)
        ctx = JobContext(job, job.carry, memory_session, checkpointer=checkpointer)
        return Run(job=job, ctx=ctx)

    def dispatch(self, jobs: Sequence[ClaimedJob], sent: float) -> None:
        """The worker's ``_dispatch``: the claim's runs take their slots (the executors are the test)."""
        runs = [self.run_of(job) for job in jobs]
        self.inflight.add_many(runs, sent)
        self.dispatched.extend(runs)

    def claim_and_run(self) -> list[Run]:
        """One claim round, each claimed run through the whole pipeline on this thread."""
        start = len(self.dispatched)
        self.producer.claim_round()
        runs = self.dispatched[start:]
        for run in runs:
            self.pipeline.handle(run)
        return runs
