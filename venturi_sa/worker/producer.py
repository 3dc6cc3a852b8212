"""The claim loop: claim at most the free slots, then wait for the next reason to claim.

One claim statement covers every kind the worker runs, capped or not, so
priority and age order the whole claim.  When a claim filled what it could
take (more work is waiting), a freed slot is refilled within
``fetch_cooldown`` seconds, at once if enough slots are free for a
worthwhile batch.  When a claim came back short (nothing more is eligible),
the producer sleeps until the earliest of a ``NOTIFY``, the soonest future
``visible_at`` among its kinds, and the poll interval.  While every kind is
at its ``Task.concurrency`` cap it claims nothing and waits for a freed slot.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta

from sqlalchemy.exc import SQLAlchemyError

from venturi_sa.declarations.limit_rules import KindLimits
from venturi_sa.errors import SchemaNotMigrated
from venturi_sa.storage.backend import Backend, Transactions
from venturi_sa.storage.faults import is_transient, is_undefined_table
from venturi_sa.storage.params import ClaimedJob, ClaimParams, SoonestParams
from venturi_sa.worker.inflight import InFlight
from venturi_sa.worker.pipeline_stages import exception_note

logger = logging.getLogger("venturi_sa.worker")
DEFAULT_LEASE = timedelta(seconds=60)
# After a short claim, how long the producer waits for a NOTIFY before it looks up the soonest
# ``visible_at``: the handlers it just dispatched take the interpreter meanwhile, instead of waiting
# for the lookup's Python work.  Well inside the 5 ms the wait adds after the soonest job anyway.
HANDOFF = 0.002


@dataclass(frozen=True)
class Round:
    """What one claim round did: how many jobs it claimed, and whether more may be waiting."""

    claimed: int
    hungry: bool


class Producer:
    """Claims jobs of ``kinds`` for the free slots of ``inflight`` and hands each claim's jobs to ``dispatch``.

    ``dispatch(jobs, sent)`` gets the monotonic time read just before the
    claim was sent, from which the claim's leases are reckoned.
    """

    def __init__(self, backend: Backend, conns: Transactions, worker_id: str, kinds: Sequence[str],
                 leases: Mapping[str, timedelta], inflight: InFlight,
                 dispatch: Callable[[Sequence[ClaimedJob], float], None], *, batch_size: int,
                 poll_interval: float, fetch_cooldown: float, healthy: threading.Event,
                 wake: threading.Event, stopping: threading.Event, on_idle: Callable[[], None],
                 throttles: Mapping[str, timedelta] | None = None) -> None:
        self.backend = backend
        self.throttles = dict(throttles or {})  # Task.throttle by kind: the claim records and checks starts
        self.conns = conns
        self.worker_id = worker_id
        self.kinds = list(kinds)
        self.leases = dict(leases)
        self.inflight = inflight
        self.dispatch = dispatch
        self.batch_size = batch_size
        self.poll_interval = poll_interval
        self.fetch_cooldown = fetch_cooldown
        self.refill = max(1, min(batch_size, inflight.concurrency) // 2)
        self.healthy = healthy
        self.wake = wake
        self.stopping = stopping
        self.on_idle = on_idle
        self.hungry = False  # the last claim filled its limit: slots freed now have work waiting
        self._last_claim = 0.0
        self.limits: Mapping[str, KindLimits] = {}  # the kinds' declared limits (declarations/limit_rules.py)

    # -- one claim -------------------------------------------------------------------
    def params(self, free: int) -> ClaimParams:
        room = self.inflight.room()
        kinds = [k for k in self.kinds if room.get(k, 1) > 0]
        return ClaimParams(worker_id=self.worker_id, kinds=kinds, limit=min(free, self.batch_size),
                           leases=self.leases, default_lease=DEFAULT_LEASE,
                           caps={k: room[k] for k in kinds if k in room}, throttles=self.throttles,
                           limits=self.limits, skip_overridden=True)  # the limited claim takes overridden kinds

    def claim_round(self) -> Round:
        """Claim for the free slots, in one statement committed before any handler runs."""
        free = self.inflight.free()
        if free <= 0 or not self.healthy.is_set():
            return Round(0, self.hungry)
        params = self.params(free)
        if not params.kinds:  # every kind is at its cap: wait for a freed slot (or the poll interval)
            self.hungry = True  # so that a freed slot of a capped kind wakes us; then look again
            if not self.params(free).kinds:
                self.wake.wait(self.poll_interval)
            return Round(0, True)
        sent = time.monotonic()  # before the claim: its leases are reckoned from here (worker/inflight.py)
        try:
            jobs = self.conns.begin(lambda conn: self.backend.claim(conn, params))
        except SQLAlchemyError as exc:
            if is_undefined_table(exc):
                raise SchemaNotMigrated(f"queue {self.backend.prefix!r} lost its tables: "
                                        f"{exception_note(exc).splitlines()[0]}") from exc
            if is_transient(exc) and self.healthy.is_set():
                logger.error("claim failed (%s); not claiming until the database is back",
                             exception_note(exc).splitlines()[0])
                self.healthy.clear()  # the lease keeper probes and sets it again
            elif not is_transient(exc):
                logger.error("claim failed: %s", exception_note(exc).splitlines()[0])
            self.stopping.wait(min(self.poll_interval, 1.0))
            return Round(0, False)
        self._last_claim = time.monotonic()
        if jobs:
            self.dispatch(jobs, sent)
        per_kind = Counter(job.kind for job in jobs)
        capped_full = any(per_kind[k] >= n for k, n in params.caps.items())
        self.hungry = len(jobs) >= params.limit or capped_full
        return Round(len(jobs), self.hungry)

    # -- waiting ---------------------------------------------------------------------
    def slot_freed(self, free: int, kind: str) -> None:
        """Called when a run gives its slot back: wake the producer if that slot has work waiting."""
        if not self.hungry:
            return
        if free in (1, self.refill, self.inflight.concurrency) or kind in self.inflight.caps:
            self.wake.set()

    def pause(self) -> float:
        """0 if a claim should run now, else how long to wait (or until woken) before asking again.

        With work waiting, a claim runs as soon as half a batch of slots is
        free, or once ``fetch_cooldown`` has passed since the last claim with
        any slot free; never for every single freed slot.
        """
        if not self.healthy.is_set():
            return 1.0
        free = self.inflight.free()
        if free <= 0:
            return self.poll_interval  # a freed slot wakes us
        if not self.hungry or free >= self.refill:
            return 0.0
        return max(0.0, self._last_claim + self.fetch_cooldown - time.monotonic())

    def idle_wait(self) -> None:
        """Nothing more eligible: wait for a NOTIFY, the soonest ``visible_at`` or the poll interval.

        The soonest ``visible_at`` is looked up here, :data:`HANDOFF` after the
        short claim's jobs went to their handlers (a NOTIFY meanwhile ends the wait
        without a lookup: the next claim runs at once).
        """
        self.on_idle()
        if self.wake.wait(HANDOFF):
            return
        timeout = self.poll_interval
        soonest = None
        try:
            soonest = self.conns.connect(
                lambda conn: self.backend.soonest_visible(conn, SoonestParams(kinds=self.kinds)))
        except SQLAlchemyError as exc:
            logger.debug("soonest-visible lookup failed: %s", exc)
        if soonest is not None:
            timeout = min(timeout, soonest + 0.005)
        self.wake.wait(timeout)

    # -- loops -----------------------------------------------------------------------
    def _waited(self) -> bool:
        """Wait out :meth:`pause` if there is one; True if the loop should ask again."""
        self.wake.clear()
        pause = self.pause()
        if pause > 0:
            self.wake.wait(pause)
            return True
        return False

    def run(self) -> None:
        """Claim and wait until ``stopping`` is set."""
        while not self.stopping.is_set():
            if self._waited():
                continue
            result = self.claim_round()
            if not result.hungry and not self.stopping.is_set():
                self.idle_wait()

    def run_until_idle(self) -> None:
        """Claim until a claim finds nothing while no run is in flight.

        Runs still in flight may make jobs eligible again (a pause or retry
        with no delay), so the loop waits for them before it concludes.
        """
        while not self.stopping.is_set():
            if self._waited():
                continue
            busy = len(self.inflight) > 0
            result = self.claim_round()
            if result.claimed == 0 and not busy and len(self.inflight) == 0:
                return
            if not result.hungry:
                self.wake.wait(self.poll_interval)  # a finished run wakes us
