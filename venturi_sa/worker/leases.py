"""Lease maintenance: renew the leases of running jobs, recover expired ones."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import timedelta

from sqlalchemy.orm import Session

from venturi_sa.models import Models
from venturi_sa.storage import leases
from venturi_sa.storage.params import RecoverParams, RenewParams

logger = logging.getLogger("venturi_sa.worker")


class LeaseKeeper(threading.Thread):
    """Every ``renew_every`` seconds renew held leases; every ``recover_every`` recover stale ones.

    ``healthy`` is cleared while renewals fail (the database is unreachable):
    the producer stops claiming until it is set again, since it could not
    keep new leases alive either.
    """

    def __init__(self, models: Models, open_session: Callable[[], Session], worker_id: str,
                 held: Callable[[], dict[timedelta, list[tuple[str, int]]]],
                 recover: RecoverParams, renew_every: float, recover_every: float,
                 stopping: threading.Event, wake: threading.Event) -> None:
        super().__init__(name=f"venturi-leases-{models.prefix}", daemon=True)
        self.models = models
        self.open_session = open_session
        self.worker_id = worker_id
        self.held = held
        self.recover_params = recover
        self.renew_every = renew_every
        self.recover_every = recover_every
        self.stopping = stopping
        self.wake = wake
        self.healthy = threading.Event()
        self.healthy.set()

    def renew(self) -> None:
        with self.open_session() as session, session.begin():
            for lease, runs in self.held().items():
                leases.renew(self.models, session, RenewParams(worker_id=self.worker_id, runs=runs, lease=lease))

    def recover(self) -> int:
        with self.open_session() as session, session.begin():
            recovered = leases.recover(self.models, session, self.recover_params)
        for job in recovered:
            logger.warning("recovered job %s (%s) run %d from expired lease of %s%s", job.id, job.kind,
                           job.run_count, job.claimed_by, "; dead at max_failures" if job.dead else "")
        return len(recovered)

    def run(self) -> None:
        next_recover = 0.0
        while not self.stopping.is_set():
            try:
                self.renew()
                if time.monotonic() >= next_recover:
                    if self.recover():
                        self.wake.set()
                    next_recover = time.monotonic() + self.recover_every
                if not self.healthy.is_set():
                    logger.info("database reachable again; resuming claims")
                    self.healthy.set()
                    self.wake.set()
                self.stopping.wait(self.renew_every)
            except Exception as exc:  # noqa: BLE001 - keep the worker alive through outages
                if self.healthy.is_set():
                    logger.error("cannot renew leases (%s); not claiming until the database is back", exc)
                self.healthy.clear()
                self.stopping.wait(min(self.renew_every, 1.0))
