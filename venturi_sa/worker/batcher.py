"""Writing the outcomes of runs that did not use ``ctx.session``, many per statement.

The backlog is bounded: :meth:`Batcher.submit` blocks while ``max_backlog``
outcomes wait to be written, so an executor thread keeps its slot and the
worker stops claiming instead of piling up runs it has not recorded.  A
batch that fails on a transient error is retried with a capped backoff while
the leases last; one that fails otherwise is split in halves until the bad
row is alone, so one row can never sink the others, and a row alone is
retried on any error while its lease lasts (only a fenced-out write is
final).  :meth:`close` always flushes what was submitted.

Each written run's ``recorded`` is set from what the batch statement
reported for its fence (``dead`` where a stored cancel turned its outcome),
before its log line and the ``done`` report, which follow that outcome.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence

from sqlalchemy.exc import SQLAlchemyError

from venturi_sa.states import Outcome
from venturi_sa.storage.backend import Backend, Transactions
from venturi_sa.storage.faults import is_transient
from venturi_sa.storage.params import Fence, FinishManyParams
from venturi_sa.worker.pipeline_stages import exception_note
from venturi_sa.worker.recording import always, log_lost, log_recorded, retrying
from venturi_sa.worker.run import Run

logger = logging.getLogger("venturi_sa.worker")


class Batcher(threading.Thread):
    """Collects outcomes for up to ``flush_interval`` seconds or ``max_batch`` runs, then writes them.

    ``done([(run, recorded), ...])`` is called once per batch, for every
    submitted run whose outcome was written (or given up on).
    """

    def __init__(self, backend: Backend, conns: Transactions, done: Callable[[list[tuple[Run, bool]]], None],
                 retry_for: Callable[[Sequence[Run]], float], abort: threading.Event, *,
                 max_backlog: int, flush_interval: float = 0.005, max_batch: int = 200) -> None:
        super().__init__(name=f"venturi-completer-{backend.prefix}", daemon=True)
        self.backend = backend
        self.conns = conns
        self.done = done
        self.retry_for = retry_for
        self.abort = abort
        self.max_backlog = max(1, max_backlog)
        self.flush_interval = flush_interval
        self.max_batch = max_batch
        lock = threading.Lock()
        self._cond = threading.Condition(lock)  # the collector waits on it for outcomes
        self._room = threading.Condition(lock)  # submitters wait on it while the backlog is full
        self._queue: deque[Run] = deque()
        self._backlog = 0  # submitted, not yet done
        self._closing = False

    @property
    def backlog(self) -> int:
        with self._cond:
            return self._backlog

    def submit(self, run: Run) -> None:
        """Queue ``run``'s outcome; blocks while the backlog is full."""
        with self._cond:
            if self._backlog >= self.max_backlog:
                self._room.wait_for(lambda: self._backlog < self.max_backlog or self._closing)
            self._queue.append(run)
            self._backlog += 1
            if len(self._queue) == 1 or len(self._queue) >= self.max_batch:
                self._cond.notify()  # the first outcome starts a batch; a full one ends its window

    def close(self, timeout: float) -> None:
        """Flush everything submitted, then stop; waits up to ``timeout`` seconds."""
        with self._cond:
            self._closing = True
            self._cond.notify_all()
            self._room.notify_all()
        if self.is_alive():
            self.join(timeout)

    def _collect(self) -> list[Run]:
        with self._cond:
            self._cond.wait_for(lambda: bool(self._queue) or self._closing)
            if not self._queue:
                return []
            deadline = time.monotonic() + self.flush_interval
            while len(self._queue) < self.max_batch and not self._closing:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(left)  # woken early only by a full batch or close
            return [self._queue.popleft() for _ in range(min(self.max_batch, len(self._queue)))]

    def run(self) -> None:
        while True:
            batch = self._collect()
            if not batch:
                return  # closing and nothing left
            unwritten: set[Fence] = set()
            try:
                recorded = self._write(batch, unwritten)
            except Exception:  # noqa: BLE001 - the thread must survive to serve later batches
                logger.exception("outcome batch of %d failed", len(batch))
                recorded, unwritten = {}, {run.fence for run in batch}
            for run in batch:
                run.recorded = recorded.get(run.fence)
            results = [(run, run.recorded is not None) for run in batch]
            try:
                for run, ok in results:
                    self._report(run, ok, run.fence in unwritten)
            finally:
                self.done(results)
            with self._cond:
                self._backlog -= len(batch)
                self._room.notify_all()

    def _report(self, run: Run, ok: bool, unwritten: bool) -> None:
        assert run.params is not None
        try:
            if ok and run.recorded is not None:
                log_recorded(run, run.params, run.recorded)
            elif not unwritten:
                log_lost(run, run.params)
        except Exception:  # noqa: BLE001 - a broken log handler must not keep the run in flight
            logger.exception("logging the outcome of job %s failed", run.job.id)

    def _once(self, batch: Sequence[Run]) -> dict[Fence, Outcome]:
        params = FinishManyParams(outcomes=[run.params for run in batch if run.params is not None])
        return self.conns.begin(lambda conn: self.backend.finish_many(conn, params))

    def _write(self, batch: Sequence[Run], unwritten: set[Fence]) -> dict[Fence, Outcome]:
        """Write ``batch``: retried while transient, bisected when a row is at fault, a lone row always retried."""
        try:
            return retrying(lambda: self._once(batch), until=self.retry_for(batch),
                            what=f"recording {len(batch)} outcomes", abort=self.abort,
                            gave_up=lambda: all(run.ctx.lease_lost for run in batch),
                            retryable=is_transient if len(batch) > 1 else always)
        except SQLAlchemyError as exc:
            if len(batch) > 1 and not is_transient(exc):
                middle = len(batch) // 2
                return {**self._write(batch[:middle], unwritten), **self._write(batch[middle:], unwritten)}
            unwritten.update(run.fence for run in batch)
            logger.error("could not record %d outcomes: %s; their leases will expire and the jobs will be "
                         "recovered", len(batch), exception_note(exc))
            return {}
