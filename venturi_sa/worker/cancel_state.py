"""One run's cancel request (what ``ctx.cancelled`` reads), set from the lease keeper's thread.

Held by the run's context and shared by the contexts of its reruns;
:mod:`venturi_sa.worker.cancel` delivers it and forces the outcome.  Nothing
here is stored: a worker that crashes loses the flag, and the request row
(``<prefix>_cancels``) is applied by the outcome write or the lease recovery.
"""

from __future__ import annotations

import threading

from venturi_sa.errors import JobCancelled

_MARK = threading.Lock()


class CancelState:
    """One run's cancel request, shared by the contexts of its reruns; set from the lease keeper's thread.

    A flag, plus a ``threading.Event`` made only when a handler waits for the
    cancel (``ctx.wait_cancelled``): most runs never wait, and an event (a
    lock and a condition) per claimed job was a measurable share of the
    worker's per-job time.
    """

    __slots__ = ("is_set", "note", "timed_out", "_event")

    def __init__(self) -> None:
        self.is_set = False  # set (once, under _MARK) with note and timed_out
        self.note: str | None = None
        self.timed_out = False  # cancelled by the task's time limit, not by an operator
        self._event: threading.Event | None = None

    def mark(self, note: str, timed_out: bool = False) -> bool:
        """Record the request; False if it was recorded already (the first one decides)."""
        with _MARK:
            if self.is_set:
                return False
            self.note, self.timed_out = note, timed_out
            self.is_set = True
            event = self._event
        if event is not None:
            event.set()
        return True

    def wait(self, timeout: float | None) -> bool:
        """Block up to ``timeout`` seconds for the request; True if it came."""
        if self.is_set:
            return True
        with _MARK:
            event = self._event
            if event is None:
                event = self._event = threading.Event()
            if self.is_set:  # marked before the event existed
                event.set()
        return event.wait(timeout)

    def raise_if_set(self) -> None:
        if self.is_set:
            raise JobCancelled(self.note or "cancelled")
