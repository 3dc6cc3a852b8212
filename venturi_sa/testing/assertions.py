"""Assertions on the jobs a session has enqueued, its own uncommitted ones included."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from venturi_sa.models import JobBase, Models
from venturi_sa.queue import Queue
from venturi_sa.storage import clock as dbclock
from venturi_sa.storage import harness
from venturi_sa.task import Task
from venturi_sa.testing.sessions import AnySession, as_session

TaskRef = type[Task] | str | None
"""A task type, a kind string, or None for any kind."""
Scheduled = tuple[datetime | timedelta, timedelta]
SHOWN = 20  # jobs listed in a failure message


def _models(queue: Queue | Models) -> Models:
    return queue.models if isinstance(queue, Queue) else queue


def _kind(task: TaskRef) -> str | None:
    if task is None or isinstance(task, str):
        return task
    if isinstance(task, type) and issubclass(task, Task):
        return task.kind_name()
    raise TypeError(f"expected a Task subclass, a kind or None, got {task!r:.80}")


def enqueued(session: AnySession, queue: Queue | Models, task: TaskRef = None) -> list[JobBase]:
    """The queue's pending jobs ``session`` sees (of ``task``'s kind, if given), oldest first.

    Uncommitted jobs of the session's own transaction are included; the
    session is flushed first.
    """
    kind = _kind(task)
    return harness.pending_jobs(_models(queue), as_session(session), [kind] if kind is not None else None)


def _subset(actual: Any, expected: Any) -> bool:
    if isinstance(expected, Mapping):
        return isinstance(actual, Mapping) and all(k in actual and _subset(actual[k], v) for k, v in expected.items())
    return bool(actual == expected)


def _payload_matches(actual: Any, expected: Mapping[str, Any], task: TaskRef) -> bool:
    if _subset(actual, expected):
        return True
    if isinstance(task, type) and issubclass(task, Task):
        try:  # the expected fields given as the handler sees them (dates, decimals, ...)
            dumped = task.payload_schema.dump(expected)
        except Exception:  # noqa: BLE001 - schema hooks are user code; no match then
            return False
        return _subset(actual, dumped)
    return False


class _Filter:
    def __init__(self, session: AnySession, task: TaskRef, payload: Mapping[str, Any] | None, priority: int | None,
                 scheduled_within: Scheduled | datetime | timedelta | None) -> None:
        self.task, self.kind, self.payload, self.priority = task, _kind(task), payload, priority
        self.window: tuple[datetime, timedelta] | None = None
        if scheduled_within is not None:
            when, tolerance = (scheduled_within if isinstance(scheduled_within, tuple)
                               else (scheduled_within, timedelta(seconds=1)))
            if isinstance(when, timedelta):
                when = dbclock.current_time(as_session(session)) + when
            self.window = (when, tolerance)

    def __call__(self, job: JobBase) -> bool:
        if self.kind is not None and job.kind != self.kind:
            return False
        if self.priority is not None and job.priority != int(self.priority):
            return False
        if self.payload is not None and not _payload_matches(job.payload, self.payload, self.task):
            return False
        if self.window is not None:
            when, tolerance = self.window
            return abs(job.visible_at - when) <= tolerance
        return True

    def describe(self) -> str:
        parts = [f"of kind {self.kind!r}" if self.kind else "of any kind"]
        if self.payload is not None:
            parts.append(f"with payload including {dict(self.payload)!r}")
        if self.priority is not None:
            parts.append(f"priority {int(self.priority)}")
        if self.window is not None:
            parts.append(f"visible at {self.window[0].isoformat()} ± {self.window[1]}")
        return " ".join(parts)


def _listing(queue: Queue | Models, jobs: list[JobBase]) -> str:
    if not jobs:
        return f"No jobs are enqueued in queue {_models(queue).prefix!r}."
    lines = [f"Enqueued in queue {_models(queue).prefix!r} ({len(jobs)} pending):"]
    lines += [f"  {j.kind}  payload={j.payload!r}  priority={j.priority}  visible_at={j.visible_at.isoformat()}"
              for j in jobs[:SHOWN]]
    if len(jobs) > SHOWN:
        lines.append(f"  ... and {len(jobs) - SHOWN} more")
    return "\n".join(lines)


def assert_enqueued(session: AnySession, queue: Queue | Models, task: TaskRef = None, *,
                    payload: Mapping[str, Any] | None = None, priority: int | None = None,
                    scheduled_within: Scheduled | datetime | timedelta | None = None,
                    count: int | None = None) -> list[JobBase]:
    """Assert ``session`` sees a pending job matching all the filters; return the matches.

    ``task`` is a task type or kind; ``payload`` matches a subset of the
    stored payload (nested objects too), given in stored (JSON) form or, for
    a task type, as its schema loads it; ``scheduled_within=(when,
    tolerance)`` bounds ``visible_at`` (``when`` a datetime, or a timedelta
    from the database clock now; a bare ``when`` means ± 1 second);
    ``count`` demands exactly that many matches.  The ``AssertionError``
    lists what was enqueued.
    """
    every = enqueued(session, queue)
    match = _Filter(session, task, payload, priority, scheduled_within)
    found = [j for j in every if match(j)]
    if (count is None and not found) or (count is not None and len(found) != count):
        wanted = "a job" if count is None else f"{count} job{'s' if count != 1 else ''}"
        raise AssertionError(f"Expected {wanted} {match.describe()} to be enqueued, found {len(found)}.\n"
                             f"{_listing(queue, every)}")
    return found


def refute_enqueued(session: AnySession, queue: Queue | Models, task: TaskRef = None, *,
                    payload: Mapping[str, Any] | None = None, priority: int | None = None,
                    scheduled_within: Scheduled | datetime | timedelta | None = None) -> None:
    """Assert ``session`` sees no pending job matching the filters (see :func:`assert_enqueued`)."""
    every = enqueued(session, queue)
    match = _Filter(session, task, payload, priority, scheduled_within)
    found = [j for j in every if match(j)]
    if found:
        raise AssertionError(f"Expected no job {match.describe()} to be enqueued, found {len(found)}.\n"
                             f"{_listing(queue, found)}")


__all__ = ["assert_enqueued", "enqueued", "refute_enqueued"]
