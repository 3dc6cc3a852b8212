"""Debounce and throttle: class policies that merge enqueues by ``dedup_key`` and decide when they run.

``Task.debounce = Debounce(window, max_wait=None)``: the first enqueue of a
key is eligible at now + ``window``; each later enqueue of the key merges
into that pending job and moves it to min(now + ``window``, first enqueue +
``max_wait``).  ``Task.throttle = timedelta``: at most one start per window
per key; an enqueue merges into the key's pending job, or is inserted
eligible at the key's last start + the window.  Nothing is dropped.

For both, the newest payload wins unless the task overrides ``merge()``,
which then decides (``Independent()`` inserts a row of its own, held the
same way).  A debounce or throttle only ever moves a job later: a job's
``visible_at`` becomes the latest of what it was, the debounce time and the
throttle time.  Every time is on the database clock.  The SQL is in
:mod:`venturi_sa.storage.merge_timing`; this module checks the policies
and says what applies to a task type.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from sqlalchemy.orm import Session
from sqlalchemy.orm.attributes import set_committed_value

from venturi_sa.errors import InvalidOption
from venturi_sa.models import JobBase, Models
from venturi_sa.outcomes import Coalesce, MergeDecision
from venturi_sa.storage import merge_timing
from venturi_sa.storage.merge_timing import HeldJob, HoldParams

if TYPE_CHECKING:
    from venturi_sa.task import Task

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


def timing_of(task_type: type[Task]) -> Timing:
    """The debounce and throttle of ``task_type`` (falsy when it has neither)."""
    debounce, throttle = task_type.debounce, task_type.throttle
    if debounce is None and throttle is None:
        return NO_TIMING
    return Timing(window=debounce.window if debounce is not None else None,
                  max_wait=debounce.max_wait if debounce is not None else None, throttle=throttle)


def check_policies(cls: type[Task], default_key: Callable[..., Any]) -> None:
    """Check ``cls.debounce`` and ``cls.throttle`` when the class is defined; ``InvalidOption`` naming the bad one.

    Either needs ``dedup_key`` overridden (``default_key`` is the base
    class's, which keys nothing).  Both together are allowed: the job waits
    for the later of the two times.
    """
    name = cls.__name__
    if cls.debounce is not None and not isinstance(cls.debounce, Debounce):
        raise InvalidOption(f"{name}.debounce must be None or venturi_sa.Debounce(window, max_wait=None), "
                            f"got {cls.debounce!r}")
    if cls.throttle is not None:
        _window(cls.throttle, f"{name}.throttle")
    if (cls.debounce is not None or cls.throttle is not None) and cls.dedup_key is default_key:
        which = "debounce" if cls.debounce is not None else "throttle"
        raise InvalidOption(f"{name}.{which} is keyed by dedup_key, but {name} does not override dedup_key(): "
                            "define dedup_key(self) returning the key (or pass dedup_key= to @task)")


def decide(task: Task, payload: Any, existing: JobBase, default_merge: Callable[..., Any]) -> MergeDecision:
    """The merge decision for ``task`` (stored ``payload``) against ``existing``.

    A debounced or throttled task that keeps the base ``merge()`` coalesces
    with its own, newest payload; otherwise its ``merge()`` decides.
    """
    task_type = type(task)
    if task_type.merge is default_merge and timing_of(task_type):
        return Coalesce(payload)
    return task.merge(existing)


def hold(models: Models, session: Session, written: Sequence[tuple[type[Task], str | None, JobBase]]) -> None:
    """After an enqueue's writes: move each debounced or throttled job it created or merged into.

    ``written`` is one ``(task type, dedup key, job)`` per enqueued task (the
    job it ended in).  A task with no key, or a type with neither policy, is
    left alone; each job's ``visible_at`` attribute is set to the value
    written, in the caller's transaction (commit keeps it, rollback undoes it).
    """
    jobs: dict[str, tuple[Timing, JobBase]] = {}
    for task_type, key, job in written:
        timing = timing_of(task_type) if key is not None else NO_TIMING
        if timing:
            jobs[job.id] = (timing, job)
    if not jobs:
        return
    moved = merge_timing.hold(models, session, HoldParams(jobs=[
        HeldJob(job_id=job_id, window=t.window, max_wait=t.max_wait, throttle=t.throttle)
        for job_id, (t, _) in jobs.items()]))
    for job_id, visible_at in moved.items():
        set_committed_value(jobs[job_id][1], "visible_at", visible_at)


def held_sentence(task_type: type[Task] | None, until: datetime) -> str | None:
    """The ``explain`` sentence of a pending job of ``task_type`` waiting until ``until``, or None if no policy."""
    if task_type is None:
        return None
    timing = timing_of(task_type)
    parts = []
    if timing.window is not None:
        cap = f", at most {timing.max_wait} after the key's first enqueue" if timing.max_wait is not None else ""
        parts.append(f"debounced until {until.isoformat()} ({timing.window} after the key's latest enqueue{cap})")
    if timing.throttle is not None:
        parts.append(f"throttled until {until.isoformat()} (one start per {timing.throttle} per key)")
    return "scheduled: " + "; ".join(parts) if parts else None


__all__ = ["MAX_WINDOW", "NO_TIMING", "Debounce", "Timing", "check_policies", "decide", "held_sentence",
           "hold", "timing_of"]
