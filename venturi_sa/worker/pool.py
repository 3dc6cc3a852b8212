"""The executor threads: each takes a claimed run, runs its pipeline and hands its outcome on."""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable

from venturi_sa.task import Registry
from venturi_sa.worker.executor import close_quietly, process
from venturi_sa.worker.inflight import InFlight
from venturi_sa.worker.outcome_hooks import has_hook
from venturi_sa.worker.run import Run

logger = logging.getLogger("venturi_sa.worker")
SESSION_ATTEMPTS = 3  # executions of a ctx.session handler whose commit a transient fault lost


class Executors:
    """``count`` threads, each taking a run, processing it and handing its outcome on.

    A run that used ``ctx.session`` is persisted by this thread in that
    session (``persist_in_session``); any other goes to ``submit`` (the
    batcher, which blocks while its backlog is full, so the run keeps its
    slot).  Whatever happens, the run's session is closed and its slot
    freed; ``finished(run, recorded)`` is called for runs persisted here.
    """

    def __init__(self, count: int, registry: Registry, inflight: InFlight,
                 persist_in_session: Callable[[Run, bool], bool | None], submit: Callable[[Run], None] | None,
                 finished: Callable[[Run, bool], None]) -> None:
        self.registry = registry
        self.inflight = inflight
        self.persist_in_session = persist_in_session
        self.submit = submit
        self.finished = finished
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
            if self.inflight.start(run):  # False: released at shutdown before it started
                self._handle(run)

    def _handle(self, run: Run) -> None:
        handed_on, recorded = False, False
        try:
            for attempt in range(1, SESSION_ATTEMPTS + 1):
                process(run, self.registry)
                if run.released:
                    break  # released at shutdown while it ran: nothing of it is persisted
                if self.submit is not None and not run.ctx.session_used and not has_hook(run):
                    self.submit(run)
                    handed_on = True
                    break
                outcome = self.persist_in_session(run, attempt < SESSION_ATTEMPTS)
                if outcome is not None:
                    recorded = outcome
                    break
                run.rerun()  # the session work was lost to a transient fault: run it again
        except BaseException:  # noqa: BLE001 - never lose a slot or a thread
            logger.exception("unexpected error finishing job %s run %d", run.job.id, run.job.run_count)
        finally:
            close_quietly(run.ctx.take_session())
            self.inflight.handler_done(run)
            if not handed_on and not run.released:
                self.finished(run, recorded)
