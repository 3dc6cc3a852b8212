"""The worker's archiving step: move terminal jobs out of ``<prefix>_jobs`` into the archive.

A thread, started by :meth:`Worker.run` when the queue's ``archive_after``
is not None: every ``every`` seconds it attaches the archive's partitions of
today and tomorrow if missing, then moves up to ``max_batches`` batches of
jobs that finished more than ``archive_after`` ago (see
:func:`venturi_sa.ops.archive.archive`; each batch is its own transaction,
so a worker killed mid-pass leaves every job whole in one place).  Several
workers archiving the same queue share the work: the move skips rows another
transaction holds, and attaching is serialized by an advisory lock.

Not a :class:`~venturi_sa.storage.backend.Backend` verb: archiving is
PostgreSQL-only maintenance beside the worker's path (claims, outcomes and
renewals never read the archive), so it runs the operator's pass, whose
short transactions call :mod:`venturi_sa.storage.archive` directly.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import timedelta

import sqlalchemy as sa

from venturi_sa.models import Models
from venturi_sa.ops.archive import archive

logger = logging.getLogger("venturi_sa.worker")
BATCH = 1000
MAX_BATCHES = 50  # per pass (50,000 jobs): a backlog is moved over several passes, never in one long burst


class Archiver(threading.Thread):
    """Archives ``models``' terminal jobs older than ``after`` every ``every`` seconds until ``stopping``.

    ``engine`` returns the sync engine to use, called at each pass (a worker
    on an ``AsyncEngine`` derives it on first use; a missing sync driver is
    then logged as an archiving failure, not a failed start).
    """

    def __init__(self, models: Models, engine: Callable[[], sa.Engine], after: timedelta, every: float,
                 stopping: threading.Event, batch_size: int = BATCH, max_batches: int = MAX_BATCHES) -> None:
        super().__init__(name=f"venturi-archiver-{models.prefix}", daemon=True)
        self.models = models
        self.engine = engine
        self.after = after
        self.every = every
        self.stopping = stopping
        self.batch_size = batch_size
        self.max_batches = max_batches
        self.moved = 0
        """Jobs this thread moved so far."""
        self.passes = threading.Event()
        """Set after each pass that ran to its end (tests wait on it)."""
        self._failing = False

    def archive_once(self) -> int:
        """One pass: attach missing partitions, then move up to ``max_batches`` batches; returns jobs moved."""
        moved = archive(self.models, self.engine(), older_than=self.after, batch_size=self.batch_size,
                        max_batches=self.max_batches)
        self.moved += moved
        return moved

    def run(self) -> None:
        while not self.stopping.wait(self.every):
            try:
                moved = self.archive_once()
            except Exception as exc:  # noqa: BLE001 - retried at the next pass; claims go on meanwhile
                if not self._failing:
                    logger.error("cannot archive terminal jobs: %s", str(exc).splitlines()[0])
                self._failing = True
                continue
            if self._failing:
                logger.info("archiving terminal jobs works again")
            self._failing = False
            if moved:
                logger.debug("archived %d terminal jobs of queue %s", moved, self.models.prefix)
            self.passes.set()
