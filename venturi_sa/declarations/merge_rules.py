"""Debounce and throttle: class policies that merge enqueues by ``dedup_key`` and decide when they run.

``Task.debounce = Debounce(window, max_wait=None)``: the first enqueue of a
key is eligible at now + ``window``; each later enqueue of the key merges
into that pending job and moves it to min(now + ``window``, first enqueue +
``max_wait``).  ``Task.throttle = timedelta``: at most one start per window
per key; an enqueue merges into the key's pending job, or is inserted
eligible at the key's last start + the window.  Nothing is dropped.

For both, the newest payload wins unless the task overrides ``merge()``,
which then decides (:class:`Coalesce`, or :class:`Independent` to insert a
row of its own, held the same way).  A debounce or throttle only ever moves
a job later: a job's ``visible_at`` becomes the latest of what it was, the
debounce time and the throttle time.  Every time is on the database clock.
This module holds the declarations and their checks only, with no
database: the hold after an enqueue is :mod:`venturi_sa.merging`, its SQL
:mod:`venturi_sa.storage.merge_timing`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from venturi_sa.errors import InvalidOption

MAX_WINDOW = timedelta(days=30)
"""The longest debounce window, ``max_wait`` or throttle window."""


def _window(value: object, field: str) -> timedelta:
    if not isinstance(value, timedelta) or value <= timedelta(0):
        raise InvalidOption(f"{field} must be a positive timedelta, got {value!r}")
    if value > MAX_WINDOW:
        raise InvalidOption(f"{field} must be at most {MAX_WINDOW.days} days, got {value!r}")
    return value


@dataclass(frozen=True)
class Debounce:
    """Run once, after enqueues of a key settle: ``window`` after the last one, ``max_wait`` after the first at most.

    Raises ``InvalidOption`` at once for a window that is not a positive
    ``timedelta`` of at most 30 days, or a ``max_wait`` shorter than the window.
    """

    window: timedelta
    max_wait: timedelta | None = None

    def __post_init__(self) -> None:
        _window(self.window, "Debounce window")
        if self.max_wait is not None:
            _window(self.max_wait, "Debounce max_wait")
            if self.max_wait < self.window:
                raise InvalidOption(f"Debounce max_wait ({self.max_wait}) must be at least the window "
                                    f"({self.window}): the first enqueue would otherwise never wait a whole window")


@dataclass(frozen=True)
class Timing:
    """What one task type's merge policies ask of its jobs' ``visible_at`` (None: that policy is off)."""

    window: timedelta | None = None  # the debounce window
    max_wait: timedelta | None = None
    throttle: timedelta | None = None

    def __bool__(self) -> bool:
        return self.window is not None or self.throttle is not None


NO_TIMING = Timing()


def timing(debounce: Debounce | None, throttle: timedelta | None) -> Timing:
    """The timing of a ``debounce`` and a ``throttle`` (falsy when both are None)."""
    if debounce is None and throttle is None:
        return NO_TIMING
    return Timing(window=debounce.window if debounce is not None else None,
                  max_wait=debounce.max_wait if debounce is not None else None, throttle=throttle)


def check_policies(name: str, debounce: object, throttle: object, *, keyed: bool) -> None:
    """Check task type ``name``'s ``debounce`` and ``throttle`` as written; ``InvalidOption`` naming the bad one.

    Either needs ``dedup_key`` overridden (``keyed``).  Both together are
    allowed: the job waits for the later of the two times.
    """
    if debounce is not None and not isinstance(debounce, Debounce):
        raise InvalidOption(f"{name}.debounce must be None or venturi_sa.Debounce(window, max_wait=None), "
                            f"got {debounce!r}")
    if throttle is not None:
        _window(throttle, f"{name}.throttle")
    if (debounce is not None or throttle is not None) and not keyed:
        which = "debounce" if debounce is not None else "throttle"
        raise InvalidOption(f"{name}.{which} is keyed by dedup_key, but {name} does not override dedup_key(): "
                            "define dedup_key(self) returning the key (or pass dedup_key= to @task)")


def held_sentence(held_by: Timing, until: datetime) -> str | None:
    """The ``explain`` sentence of a pending job held by ``held_by`` until ``until``, or None if no policy."""
    parts = []
    if held_by.window is not None:
        cap = f", at most {held_by.max_wait} after the key's first enqueue" if held_by.max_wait is not None else ""
        parts.append(f"debounced until {until.isoformat()} ({held_by.window} after the key's latest enqueue{cap})")
    if held_by.throttle is not None:
        parts.append(f"throttled until {until.isoformat()} (one start per {held_by.throttle} per key)")
    return "scheduled: " + "; ".join(parts) if parts else None


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


__all__ = ["MAX_WINDOW", "NO_TIMING", "Coalesce", "Debounce", "Independent", "MergeDecision", "Timing",
           "check_policies", "held_sentence", "timing"]
