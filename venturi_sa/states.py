"""The job state machine as data: statuses, journal outcomes, transitions.

::

    enqueue ──> pending ──claim──> claimed ──complete──> completed
                  ^  ^                │ │ │
                  │  └──pause/retry/──┘ │ └──die / backstop──> dead
                  │     release/stale   │                       │
                  └────────── admin requeue ────────────────────┘

Every write that leaves ``claimed`` is fenced in SQL on ``status``,
``claimed_by`` and ``run_count``; terminal rows change only by cleanup or an
explicit admin requeue.
"""

from __future__ import annotations

import enum


class Status(str, enum.Enum):
    """A job's lifecycle state (``<prefix>_jobs.status``)."""

    PENDING = "pending"
    CLAIMED = "claimed"
    COMPLETED = "completed"
    DEAD = "dead"

    @property
    def terminal(self) -> bool:
        return self in (Status.COMPLETED, Status.DEAD)


class Outcome(str, enum.Enum):
    """What a journal row records (``<prefix>_journal.outcome``)."""

    COMPLETED = "completed"
    PAUSED = "paused"
    RETRIED = "retried"
    DEAD = "dead"
    STALE_RECOVERED = "stale-recovered"
    RELEASED = "released"
    MERGED = "merged"


STATUSES: tuple[str, ...] = tuple(s.value for s in Status)
OUTCOMES: tuple[str, ...] = tuple(o.value for o in Outcome)
TERMINAL: tuple[str, ...] = (Status.COMPLETED.value, Status.DEAD.value)

# Journal outcome -> status of the job row after it is recorded.
OUTCOME_STATUS: dict[Outcome, Status] = {
    Outcome.COMPLETED: Status.COMPLETED,
    Outcome.PAUSED: Status.PENDING,
    Outcome.RETRIED: Status.PENDING,
    Outcome.DEAD: Status.DEAD,
    Outcome.STALE_RECOVERED: Status.PENDING,
    Outcome.RELEASED: Status.PENDING,
    Outcome.MERGED: Status.PENDING,
}

# Allowed status transitions (from, to).
TRANSITIONS: frozenset[tuple[Status, Status]] = frozenset(
    {
        (Status.PENDING, Status.CLAIMED),  # claim
        (Status.PENDING, Status.DEAD),  # admin kill
        (Status.CLAIMED, Status.COMPLETED),  # complete
        (Status.CLAIMED, Status.PENDING),  # pause, retry, release, stale recovery
        (Status.CLAIMED, Status.DEAD),  # die, backstop, stale recovery at backstop
        (Status.DEAD, Status.PENDING),  # admin requeue
    }
)
