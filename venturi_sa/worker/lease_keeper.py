"""Lease maintenance: renew the leases of running jobs, recover expired ones."""

from __future__ import annotations

import logging
import threading
import time
from datetime import timedelta

from venturi_sa.states import Outcome
from venturi_sa.storage.backend import Backend, Transactions, Tx
from venturi_sa.storage.params import PING, Fence, RecoverParams, RenewParams
from venturi_sa.worker.cancel import deliver_cancel
from venturi_sa.worker.inflight import InFlight
from venturi_sa.worker.pipeline_stages import exception_note

logger = logging.getLogger("venturi_sa.worker")
NUDGE_SLICE = 0.1  # the longest a stop waits for the lease keeper's sleep


class LeaseKeeper(threading.Thread):
    """Every ``renew_every`` seconds renew held leases; every ``recover_every`` recover stale ones.

    Renewal never waits on row locks (a row being written is renewed next
    time); it tells ``inflight`` how long each renewed lease surely lasts
    (a queued run's start is judged by its latest lease), marks the runs of
    ``inflight`` whose claim is gone (logging each once) and delivers the
    cancel requests it reads to their runs.
    ``healthy`` is cleared while renewals fail (the database is unreachable):
    the producer stops claiming until it is set again, since it could not
    keep new leases alive either.  A failing recovery is logged as such and
    does not stop claims.
    """

    def __init__(self, backend: Backend, conns: Transactions, worker_id: str, inflight: InFlight,
                 recover: RecoverParams, renew_every: float, recover_every: float,
                 stopping: threading.Event, wake: threading.Event, healthy: threading.Event) -> None:
        super().__init__(name=f"venturi-leases-{backend.prefix}", daemon=True)
        self.backend = backend
        self.conns = conns
        self.worker_id = worker_id
        self.inflight = inflight
        self.recover_params = recover
        self.renew_every = renew_every
        self.recover_every = recover_every
        self.stopping = stopping
        self.wake = wake
        self.nudge = threading.Event()
        """Set (by the listener, on a cancel ``NOTIFY``) to renew now instead of at the next interval."""
        self.healthy = healthy
        self.healthy.set()
        self._recover_failing = False

    def renew(self) -> None:
        """Renew every held lease; with none held and the database in doubt, probe it."""
        held = self.inflight.held()
        if not held:
            if not self.healthy.is_set():
                self.conns.connect(lambda tx: self.backend.ping(tx, PING))
            return
        lost: set[Fence] = set()
        cancels: dict[Fence, str] = {}
        renewed: dict[timedelta, frozenset[Fence]] = {}

        def renew_all(conn: Tx) -> None:
            for lease, runs in held.items():
                result = self.backend.renew(conn, RenewParams(worker_id=self.worker_id, runs=runs, lease=lease))
                renewed[lease] = result.renewed
                lost.update(result.lost)
                cancels.update(result.cancels)

        since = time.monotonic()  # before the statements: the database's new expiries come later
        self.conns.begin(renew_all)
        for lease, fences in renewed.items():  # committed: a queued run may start that much later
            self.inflight.renewed(fences, since, lease)
        for run in self.inflight.lost(frozenset(lost)) if lost else ():
            run.ctx.log.warning("lease lost: job %s run %d is no longer claimed by this worker; "
                                "its outcome will not be recorded", run.job.id, run.job.run_count)
        for run in self.inflight.find(frozenset(cancels)) if cancels else ():
            deliver_cancel(run, cancels[run.fence])

    def recover(self) -> int:
        recovered = self.conns.begin(lambda conn: self.backend.recover(conn, self.recover_params))
        for job in recovered:  # what the recovery recorded: dead as cancelled, dead at max_failures or back
            logger.warning("recovered job %s (%s) run %d from expired lease of %s%s", job.id, job.kind,
                           job.run_count, job.claimed_by,
                           "; dead as cancelled" if job.outcome is Outcome.DEAD else
                           "; dead at max_failures" if job.dead else "")
        return len(recovered)

    def _renew_round(self) -> None:
        try:
            self.renew()
        except Exception as exc:  # noqa: BLE001 - keep the worker alive through outages
            if self.healthy.is_set():
                logger.error("cannot renew leases (%s); not claiming until the database is back",
                             exception_note(exc).splitlines()[0])
            self.healthy.clear()
            return
        if not self.healthy.is_set():
            logger.info("database reachable again; resuming claims")
            self.healthy.set()
            self.wake.set()

    def _recover_round(self) -> None:
        try:
            if self.recover():
                self.wake.set()
        except Exception as exc:  # noqa: BLE001 - recovery is retried at its next interval
            if not self._recover_failing:
                logger.error("cannot recover expired leases: %s", exception_note(exc).splitlines()[0])
            self._recover_failing = True
            return
        if self._recover_failing:
            logger.info("lease recovery works again")
        self._recover_failing = False

    def run(self) -> None:
        next_recover = 0.0
        while not self.stopping.is_set():
            self._renew_round()
            if self.healthy.is_set() and time.monotonic() >= next_recover:
                self._recover_round()
                next_recover = time.monotonic() + self.recover_every
            self._sleep(self.renew_every if self.healthy.is_set() else min(self.renew_every, 1.0))

    def _sleep(self, seconds: float) -> None:
        """Wait ``seconds``, less if stopping or nudged (checked every ``NUDGE_SLICE``)."""
        deadline = time.monotonic() + seconds
        while not self.stopping.is_set():
            left = deadline - time.monotonic()
            if left <= 0 or self.nudge.wait(min(left, NUDGE_SLICE)):
                break
        self.nudge.clear()
