"""Inline mode: each enqueue on a queue runs its jobs at once, in the caller's session."""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy.orm import Session

from venturi_sa.models import JobBase
from venturi_sa.queue import Queue
from venturi_sa.states import Status
from venturi_sa.storage import harness
from venturi_sa.testing.drain import DrainedRun, live_clock, run_pass
from venturi_sa.testing.sessions import expire_jobs

PASS_LIMIT = 10_000


class InlineOutsideTests(UserWarning):
    """``testing.inline`` was switched on outside a pytest run."""


class InlineRunner:
    """The enqueue hook of :func:`inline`; :attr:`runs` lists every run it made, in order."""

    def __init__(self, queue: Queue, fail_fast: bool) -> None:
        self.queue = queue
        self.fail_fast = fail_fast
        self.runs: list[DrainedRun] = []

    def __call__(self, session: Session, jobs: list[JobBase]) -> None:
        returned = [job.id for job in jobs]
        ids = {job.id for job in jobs if job.status == Status.PENDING.value}
        if not ids:
            return
        try:
            with live_clock(session):
                self.runs += run_pass(session, self.queue, self.queue.registry.kinds, fail_fast=self.fail_fast,
                                      limit=PASS_LIMIT, only=ids)
        finally:
            expire_jobs(session, self.queue.models)
        # The jobs the enqueue returns, loaded again: readable with no lazy load (MissingGreenlet under asyncio).
        harness.reload_jobs(self.queue.models, session, returned)


@contextmanager
def inline(queue: Queue, *, fail_fast: bool = True) -> Iterator[InlineRunner]:
    """While the block runs, every enqueue on ``queue`` runs its new jobs before returning.

    Each job runs as :func:`~venturi_sa.testing.drain` runs it: claimed,
    run in a savepoint of the *enqueuing* session (``ctx.session`` is that
    session), its outcome validated and recorded with its journal row, all
    in the caller's transaction; the jobs the enqueue returns are loaded
    again after their runs, so their attributes (``job.id``, ``job.status``)
    are readable at once, also from ``enqueue_async`` (no lazy load, so no
    ``MissingGreenlet``).  A handler exception propagates out of the
    enqueue call (``fail_fast``; ``False`` records a retry instead).  Jobs a
    handler enqueues run at once too, inside it.  Jobs scheduled for later
    (``delay``/``run_at``) stay pending: use ``drain(with_scheduled=True)``
    or the clock.  Meant for tests: warns :class:`InlineOutsideTests` when
    not under pytest.
    """
    if "PYTEST_CURRENT_TEST" not in os.environ:
        warnings.warn("venturi_sa.testing.inline() is meant for tests: every enqueue on this queue now runs "
                      "its jobs in the caller's transaction", InlineOutsideTests, stacklevel=3)
    runner = InlineRunner(queue, fail_fast)
    queue.enqueue_hooks.append(runner)
    try:
        yield runner
    finally:
        queue.enqueue_hooks.remove(runner)


__all__ = ["InlineOutsideTests", "InlineRunner", "inline"]
