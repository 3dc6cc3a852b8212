"""Cancelling a run in a worker: the run's cancel state, its delivery, and the outcome it forces.

A cancel reaches a worker through its lease renewal (the round trip it makes
every ``lease / 3`` anyway, so delivery needs no LISTEN and survives a
listener reconnect), sooner when a ``NOTIFY`` with
:data:`~venturi_sa.storage.cancels.CANCEL_PAYLOAD` makes the lease keeper
renew at once.  Delivery sets the run's :class:`~venturi_sa.worker.cancel_state.CancelState` (what
``ctx.cancelled`` reads) and cancels an ``async def`` handler's task.  When
the run ends, whatever the handler returned, the pipeline's control step
(:func:`venturi_sa.worker.pipeline_stages.control`) replaces its outcome: ``dead``
with the cancel note (a retryable failure for a time limit,
:func:`time_limit`), its ``ctx.session`` work rolled back.  A run that
already handed its outcome on keeps it: the fenced write decides, so
exactly one outcome is recorded.  A request the run never read (it ended
retried, paused or released first, or its worker died) is applied by the
outcome write or the lease recovery in SQL, by one rule
(:func:`venturi_sa.storage.outcomes.undelivered_cancel`): the job ends
``dead`` as cancelled all the same, and the write reports that ``dead``.
Two places, on purpose: a delivered cancel is the run's own decision (its
handler may have stopped early on ``ctx.cancelled``; its session work must
roll back before the write), which only the worker knows; an undelivered
one can only be seen where the request row is, under the row lock of the
write that ends the claim.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING

from venturi_sa.run_hooks import NOTHING

if TYPE_CHECKING:
    from venturi_sa.worker.run import Run


def deliver_cancel(run: Run, note: str) -> None:
    """Mark the run cancelled (logged once) and cancel its task if it is an ``async def`` handler running."""
    if not run.ctx.mark_cancelled(note):
        return
    run.ctx.log.debug("cancel delivered to job %s run %d: %s", run.job.id, run.job.run_count, note)
    run.cancel_task()


def time_limit(run: Run) -> AbstractContextManager[None]:
    """Enforce the run's time limit on the handler call inside this block.

    The limit is the job's own (an enqueue's ``timeout=``, read with the
    claim), else its task's ``timeout``.  A timer (only when there is a
    limit) cancels the run when the time is up: ``ctx.cancelled`` turns true
    and an ``async def`` handler's task is cancelled at its next ``await``.
    Python cannot stop a sync handler that does not check: it is reported,
    keeps its slot, and when it returns its outcome is a retryable timeout
    failure.
    """
    timeout, source = run.job.timeout, "enqueue timeout"
    if timeout is None:
        timeout, source = (run.task_type.timeout if run.task_type is not None else None), "Task.timeout"
    if timeout is None:
        return NOTHING
    return _timer(run, timeout.total_seconds(), source)


@contextmanager
def _timer(run: Run, seconds: float, source: str) -> Iterator[None]:

    def expire() -> None:
        if not run.ctx.cancel_state.mark(f"timed out after {seconds:g}s ({source})", timed_out=True):
            return
        if run.running is not None:
            run.cancel_task()
        else:
            run.ctx.log.warning("job %s run %d passed its timeout of %gs; a sync handler cannot be "
                                "interrupted: it keeps its slot until it returns, then counts as a "
                                "timeout failure", run.job.id, run.job.run_count, seconds)

    timer = threading.Timer(seconds, expire)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
