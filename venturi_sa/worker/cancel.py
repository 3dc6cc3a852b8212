"""Cancelling a run in a worker: the run's cancel state, its delivery, and the outcome it forces.

A cancel reaches a worker through its lease renewal (the round trip it makes
every ``lease / 3`` anyway, so delivery needs no LISTEN and survives a
listener reconnect), sooner when a ``NOTIFY`` with
:data:`~venturi_sa.storage.control.CANCEL_PAYLOAD` makes the lease keeper
renew at once.  Delivery sets the run's :class:`CancelState` (what
``ctx.cancelled`` reads) and cancels an ``async def`` handler's task.  When
the run ends, whatever the handler returned, :func:`cancelled_outcome`
replaces its outcome: ``dead`` with the cancel note, its ``ctx.session`` work
rolled back.  A run that already handed its outcome on keeps it: the fenced
write decides, so exactly one outcome is recorded.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from venturi_sa.errors import JobCancelled
from venturi_sa.states import Outcome
from venturi_sa.storage.params import NOTE_LIMIT, FinishParams

if TYPE_CHECKING:
    from venturi_sa.worker.run import Run


def note_text(note: str) -> str:
    return note if len(note) <= NOTE_LIMIT else note[: NOTE_LIMIT - 3] + "..."


class CancelState:
    """One run's cancel request, shared by the contexts of its reruns; set from the lease keeper's thread."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self.note: str | None = None

    def mark(self, note: str) -> bool:
        """Record the request; False if it was recorded already."""
        if self.event.is_set():
            return False
        self.note = note
        self.event.set()
        return True

    def raise_if_set(self) -> None:
        if self.event.is_set():
            raise JobCancelled(self.note or "cancelled")


def apply_cancel(run: Run) -> bool:
    """If the run was cancelled, make its outcome ``dead`` with the cancel note and roll its session back.

    No failure is counted.  Returns whether it was cancelled.
    """
    if not run.ctx.cancelled:
        return False
    run.failed = True  # the handler's ctx.session work is rolled back with the outcome write
    run.params = FinishParams(fence=run.fence, outcome=Outcome.DEAD, note=note_text(run.ctx.cancel_note or "cancelled"))
    run.ctx.log.warning("job %s run %d cancelled: %s", run.job.id, run.job.run_count, run.params.note)
    return True


def deliver_cancel(run: Run, note: str) -> None:
    """Mark the run cancelled (logged once) and cancel its task if it is an ``async def`` handler running."""
    if not run.ctx.mark_cancelled(note):
        return
    run.ctx.log.info("cancel delivered to job %s run %d: %s", run.job.id, run.job.run_count, note)
    cancel = run.cancel
    if cancel is not None:
        cancel()
