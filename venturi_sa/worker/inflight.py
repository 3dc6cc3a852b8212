"""The runs a worker holds, keyed by fence: slots, per-kind caps and the leases to renew.

A run holds a *slot* from its claim until its handler has truly ended (an
``async def`` handler's task included) and its outcome was handed on (to
the batcher, whose backlog is bounded, or written in the handler's
session): :meth:`InFlight.free_slot` gives it back, called by the run
pipeline once per run (and at shutdown for a run whose handler never
started).  A run stays *in flight* until its outcome is persisted or given
up, and its lease is renewed all that time.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta

from venturi_sa.storage.params import Fence
from venturi_sa.worker.run import Run, RunState


class InFlight:
    """Thread-safe registry of a worker's runs.

    ``on_slot_free(free, kind)`` is called (outside the lock) each time a run
    gives its slot back, with the number of free slots afterwards.
    """

    def __init__(self, concurrency: int, caps: Mapping[str, int | None], leases: Mapping[str, timedelta],
                 on_slot_free: Callable[[int, str], None], default_lease: timedelta = timedelta(seconds=60)) -> None:
        self.concurrency = concurrency
        self.caps = {k: c for k, c in caps.items() if c is not None}
        self.leases = dict(leases)
        self.default_lease = default_lease
        self._on_slot_free = on_slot_free
        self._lock = threading.Lock()
        self._empty = threading.Condition(self._lock)
        self._runs: dict[Fence, Run] = {}
        self._slots: Counter[str] = Counter()  # slots held, per kind
        self._busy = 0
        self.processed = 0  # runs that left the worker through done()

    # -- the producer's view ---------------------------------------------------------
    def free(self) -> int:
        with self._lock:
            return self.concurrency - self._busy

    def room(self) -> dict[str, int]:
        """Capped kind -> how many more of it may run now."""
        with self._lock:
            return {k: max(0, cap - self._slots[k]) for k, cap in self.caps.items()}

    def add(self, run: Run) -> None:
        """A claimed run takes a slot and is in flight."""
        self.add_many((run,))

    def add_many(self, runs: Sequence[Run]) -> None:
        """The runs of one claim take a slot each and are in flight (one lock acquisition)."""
        with self._lock:
            for run in runs:
                self._runs[run.fence] = run
                self._slots[run.job.kind] += 1
                run.holds_slot = True
            self._busy += len(runs)

    # -- the executor's view -----------------------------------------------------------
    def start(self, run: Run) -> bool:
        """QUEUED -> RUNNING; False if the run was released before it started."""
        with self._lock:
            if run.state is not RunState.QUEUED:
                return False
            run.state = RunState.RUNNING
            return True

    def persisting(self, run: Run) -> bool:
        """RUNNING -> PERSISTING: its outcome is decided; False if a stop released it first (write nothing).

        A stop no longer releases a persisting run: its outcome (handed to
        the batch writer, or written in its session) is flushed instead.
        """
        with self._lock:
            if run.state is RunState.RELEASED:
                return False
            run.state = RunState.PERSISTING
            return True

    def free_slot(self, run: Run) -> None:
        """The run's handler has ended and its outcome is handed on: its slot is free for another claim.

        Idempotent: only the first call for a run frees anything.
        """
        with self._lock:
            free = self._give_back(run)
        if free is not None:
            self._on_slot_free(free, run.job.kind)

    def done(self, run: Run) -> int | None:
        """The run leaves the worker (outcome persisted or given up).

        Returns how many runs are still in flight, or None if it had left already.
        """
        left, gone = self.done_many((run,))
        return left if gone else None

    def done_many(self, runs: Sequence[Run]) -> tuple[int, int]:
        """Many runs leave the worker (one lock acquisition, e.g. for an outcome batch).

        Returns how many runs are still in flight and how many of ``runs`` left now.
        """
        gone = 0
        with self._lock:
            for run in runs:
                if self._runs.get(run.fence) is not run:
                    continue
                del self._runs[run.fence]
                gone += 1
                if run.state is not RunState.RELEASED:
                    run.state = RunState.FINISHED
            self.processed += gone
            left = len(self._runs)
            if not left:
                self._empty.notify_all()
        return left, gone

    def _give_back(self, run: Run) -> int | None:
        """Free the run's slot if it still holds one; the free count afterwards, or None."""
        if not run.holds_slot:
            return None
        run.holds_slot = False
        self._slots[run.job.kind] -= 1
        self._busy -= 1
        return self.concurrency - self._busy

    # -- leases and shutdown -------------------------------------------------------------
    def held(self) -> dict[timedelta, list[Fence]]:
        """The fences to renew, grouped by lease duration."""
        with self._lock:
            runs = list(self._runs.values())
        by_lease: dict[timedelta, list[Fence]] = {}
        for run in runs:
            by_lease.setdefault(self.leases.get(run.job.kind, self.default_lease), []).append(run.fence)
        return by_lease

    def lost(self, fences: frozenset[Fence]) -> list[Run]:
        """Mark the runs whose claim is gone; returns those newly marked."""
        with self._lock:
            runs = [self._runs[f] for f in fences if f in self._runs]
        return [run for run in runs if run.ctx.mark_lease_lost()]

    def find(self, fences: frozenset[Fence]) -> list[Run]:
        """The runs still in flight among ``fences``."""
        with self._lock:
            return [self._runs[f] for f in fences if f in self._runs]

    def release_unfinished(self) -> list[Run]:
        """Mark every queued or running run RELEASED and out of flight; returns them.

        Persisting runs (their outcome decided) are left to finish their write.

        A queued run (its handler never starts) gives its slot back now; a
        running one keeps it until its handler ends (:meth:`free_slot`).
        """
        freed: list[tuple[int, str]] = []
        with self._lock:
            runs = [r for r in self._runs.values() if r.state in (RunState.QUEUED, RunState.RUNNING)]
            for run in runs:
                if run.state is RunState.QUEUED and (free := self._give_back(run)) is not None:
                    freed.append((free, run.job.kind))
                run.state = RunState.RELEASED
                del self._runs[run.fence]
            if not self._runs:
                self._empty.notify_all()
        for free, kind in freed:
            self._on_slot_free(free, kind)
        return runs

    def wait_empty(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for no run to be in flight."""
        with self._empty:
            return self._empty.wait_for(lambda: not self._runs, timeout=max(0.0, timeout))

    def __len__(self) -> int:
        with self._lock:
            return len(self._runs)
