"""What a task's ``run`` returns, and what its ``merge`` decides.

A handler returns one of :class:`Complete` (or ``None``), :class:`Pause`,
:class:`Retry` or :class:`Die`; an exception counts as a :class:`Retry`
whose note is the exception's message.  Each outcome is persisted together
with the handler's ``ctx.session`` work, fenced on the run's claim: if the
lease was lost, nothing of the run is committed.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any


@dataclass(frozen=True)
class Complete:
    """The job is done: ``completed``, ``finished_at`` set, kept as history."""

    note: str | None = None


@dataclass(frozen=True)
class Pause:
    """Not a failure: back to ``pending`` until ``until`` (or now + ``delay``).

    The carry is saved, so the next run resumes where this one stopped.  With
    neither ``until`` nor ``delay`` the job is eligible again at once.
    """

    until: datetime | None = None
    delay: timedelta | None = None
    note: str | None = None


@dataclass(frozen=True)
class Retry:
    """A retryable failure: ``failure_count + 1``, eligible after the backoff.

    ``delay`` overrides the task's backoff.  At ``max_failures`` the job is
    ``dead`` instead (the backstop).
    """

    note: str | None = None
    delay: timedelta | None = None


@dataclass(frozen=True)
class Die:
    """A failure retrying cannot fix: ``dead`` at once, ``finished_at`` set."""

    note: str


RunOutcome = Complete | Pause | Retry | Die
RUN_OUTCOMES = (Complete, Pause, Retry, Die)


@dataclass(frozen=True)
class Coalesce:
    """Merge decision: the oldest pending sibling absorbs the new task.

    Its payload becomes ``payload`` (already-serialized fields, validated by
    the task's schema at enqueue); a ``merged`` journal row is written on it
    and no new row is created.
    """

    payload: Any


@dataclass(frozen=True)
class Independent:
    """Merge decision: insert the new task beside its pending sibling."""


MergeDecision = Coalesce | Independent
