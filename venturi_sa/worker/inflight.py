"""The runs a worker holds, keyed by fence: slots, per-kind caps and the leases to renew.

A run holds a *slot* from its claim until its handler has truly ended (an
``async def`` handler's task included) and its outcome was handed on (to
the batcher, whose backlog is bounded, or written in the handler's
session): :meth:`InFlight.free_slot` gives it back, called by the run
pipeline once per run (and at shutdown for a run whose handler never
started).  A run stays *in flight* until its outcome is persisted or given
up, and its lease is renewed all that time.

A run's handler starts only while its lease surely lasts by this worker's own
monotonic clock: :func:`latest_start`, from the moment the claim (or the
latest renewal) was sent, is when it may have run out.  A run still queued
then (the process was paused between claim and start) is not started
(:meth:`InFlight.start` says ``LOST``): its job may already be recovered and
run elsewhere.
"""

from __future__ import annotations

import enum
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import timedelta

from venturi_sa.storage.params import Fence
from venturi_sa.worker.run import Run, RunState

START_MARGIN = 0.1  # the share of its lease a run must have left for its handler to start ...
MAX_START_MARGIN = 1.0  # ... but never more than this many seconds


def latest_start(since: float, lease: timedelta) -> float:
    """The monotonic time after which a run whose lease of ``lease`` was set at ``since`` is not started.

    ``since`` is this worker's monotonic clock read before the claim or
    renewal statement was sent: the database's expiry (its own clock at that
    statement, plus ``lease``) comes later, so the worker never compares its
    wall clock with the database's.  The margin (a tenth of the lease, at
    most a second) covers clocks running at slightly different rates and the
    moment between this check and the handler's call.
    """
    seconds = lease.total_seconds()
    return since + seconds - min(MAX_START_MARGIN, START_MARGIN * seconds)


class Start(enum.Enum):
    """What :meth:`InFlight.start` decided for a queued run."""

    RUN = "run"  # QUEUED -> RUNNING: call its handler
    RELEASED = "released"  # released at shutdown before it started
    LOST = "lost"  # its lease may have run out, or its claim is known gone: not started, nothing written


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

    def add(self, run: Run, claimed_at: float | None = None) -> None:
        """A claimed run takes a slot and is in flight."""
        self.add_many((run,), claimed_at)

    def add_many(self, runs: Sequence[Run], claimed_at: float | None = None) -> None:
        """The runs of one claim take a slot each and are in flight (one lock acquisition).

        ``claimed_at``: this worker's monotonic clock read before the claim
        was sent, from which each run's :attr:`~Run.start_deadline` is
        reckoned (None: the runs have none).
        """
        with self._lock:
            for run in runs:
                self._runs[run.fence] = run
                self._slots[run.job.kind] += 1
                run.holds_slot = True
                if claimed_at is not None:
                    run.start_deadline = latest_start(claimed_at, self.lease_of(run.job.kind))
            self._busy += len(runs)

    def lease_of(self, kind: str) -> timedelta:
        """The lease a run of ``kind`` is claimed and renewed with."""
        return self.leases.get(kind, self.default_lease)

    # -- the executor's view -----------------------------------------------------------
    def start(self, run: Run, now: float) -> Start:
        """QUEUED -> RUNNING, unless it was released (``RELEASED``) or its claim may be gone (``LOST``).

        ``LOST``: at ``now`` (the monotonic clock) the run's latest known
        lease may have run out, or the lease keeper learned its claim is
        gone.  The run is then FINISHED without an outcome (its job's
        recovery records one); it still holds its slot and stays in flight
        until the caller frees the slot and reports it given up.
        """
        with self._lock:
            if run.state is not RunState.QUEUED:
                return Start.RELEASED
            if now > run.start_deadline or run.ctx.lease_lost:
                run.state = RunState.FINISHED
                return Start.LOST
            run.state = RunState.RUNNING
            return Start.RUN

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
            by_lease.setdefault(self.lease_of(run.job.kind), []).append(run.fence)
        return by_lease

    def renewed(self, fences: Iterable[Fence], since: float, lease: timedelta) -> None:
        """The leases of ``fences`` were renewed to ``lease`` by a statement sent after ``since`` (monotonic).

        Pushes each run's start deadline (a run still queued may now start
        later); never moves one earlier.
        """
        deadline = latest_start(since, lease)
        with self._lock:
            for fence in fences:
                run = self._runs.get(fence)
                if run is not None and deadline > run.start_deadline:
                    run.start_deadline = deadline

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
