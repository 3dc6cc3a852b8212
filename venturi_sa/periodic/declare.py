"""Declaring schedules in code: ``queue.schedule(...)`` and ``schedule = ...`` on a task type.

Every declaration is validated when it is made: an invalid cron expression,
one with no next fire time (``0 0 30 2 *``, February 30), an unknown time
zone, a kind the queue does not know, a payload failing its schema (checked
when the task is built), a bad policy or a duplicate name raises
``InvalidOption`` / ``UnknownKind`` / ``InvalidPayload`` naming it, and
nothing is recorded.  Declarations touch no database: workers reconcile
them with the ``<prefix>_schedules`` table when they start
(:mod:`venturi_sa.periodic.reconcile`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any, Protocol

from venturi_sa.errors import InvalidOption, VenturiError
from venturi_sa.periodic.policies import CatchUp, check_overlap, parse_catch_up
from venturi_sa.periodic.timing import Cron, Every, Timing, load_zone
from venturi_sa.task import Task, check_priority

if TYPE_CHECKING:
    from venturi_sa.models import Models
    from venturi_sa.task import Registry

MAX_NAME = 200


@dataclass(frozen=True)
class Schedule:
    """One declared schedule: which job to insert, when, and the policies."""

    name: str
    kind: str
    payload: Any  # JSON-ready, already validated by the task's schema
    priority: int
    timing: Timing
    tz: str
    catch_up: CatchUp
    overlap: str

    def definition(self) -> dict[str, Any]:
        """The stored columns that define the schedule (reconciliation compares these)."""
        return {"kind": self.kind, "payload": self.payload, "priority": self.priority,
                "timing": self.timing.spec, "tz": self.tz, "catch_up": self.catch_up.spec,
                "overlap": self.overlap}


def build(task: Task, *, cron: str | None = None, every: timedelta | None = None, tz: str | None = None,
          name: str | None = None, catch_up: str = "latest", overlap: str = "allow",
          priority: int | None = None) -> Schedule:
    """A validated :class:`Schedule` for ``task`` (see the module docstring for the errors)."""
    if not isinstance(task, Task):
        raise InvalidOption(f"schedule() takes a task instance such as Report(day='mon'), got {task!r}")
    if (cron is None) == (every is None):
        raise InvalidOption("schedule() takes exactly one of cron='<expression>' or every=timedelta(...)")
    timing: Timing
    if cron is not None:
        if not isinstance(cron, str):
            raise InvalidOption(f"cron must be a string such as '0 3 * * *', got {cron!r}")
        zone = tz if tz is not None else "UTC"
        timing = Cron(cron.strip(), load_zone(zone))
    else:
        if tz is not None:
            raise InvalidOption("tz= applies to cron schedules; every= counts absolute time (no time zone)")
        zone = "UTC"
        timing = Every(every)  # type: ignore[arg-type]
    kind = type(task).KIND
    label = cron.strip() if cron is not None else f"every {timing.spec.partition(':')[2]}s"
    chosen = name if name is not None else f"{kind}@{label}"
    if not isinstance(chosen, str) or not chosen.strip() or len(chosen) > MAX_NAME:
        raise InvalidOption(f"schedule name must be a non-empty string of at most {MAX_NAME} characters, "
                            f"got {name!r}")
    if cron is not None:
        _check_fires(chosen, cron.strip(), timing)
    return Schedule(
        name=chosen, kind=kind, payload=task.stored_payload(),
        priority=int(check_priority(priority if priority is not None else type(task).priority)),
        timing=timing, tz=zone, catch_up=parse_catch_up(catch_up), overlap=check_overlap(overlap))


def _check_fires(name: str, expression: str, timing: Timing) -> None:
    """``InvalidOption`` naming the schedule if ``expression`` has no next fire time (e.g. February 30)."""
    try:
        timing.after(datetime.now(timezone.utc))
    except (ValueError, VenturiError) as exc:  # croniter's CroniterBadDateError is a ValueError
        raise InvalidOption(f"schedule {name!r}: cron expression {expression!r} has no next fire time "
                            f"(it matches no date: {exc})") from None


def from_task_type(task_type: type[Task]) -> list[Schedule]:
    """The schedules a task type declares with ``schedule = "<cron>"`` (or a list), empty payload."""
    declared = getattr(task_type, "schedule", None)
    if declared is None:
        return []
    expressions: Sequence[object] = [declared] if isinstance(declared, str) else declared
    if not isinstance(expressions, (list, tuple)) or not expressions:
        raise InvalidOption(f"{task_type.__name__}.schedule must be a cron string or a list of them, "
                            f"got {declared!r}")
    one = len(expressions) == 1
    schedules = []
    for expression in expressions:
        if not isinstance(expression, str):
            raise InvalidOption(f"{task_type.__name__}.schedule entries must be cron strings, got {expression!r}")
        name = task_type.KIND if one else f"{task_type.KIND}@{expression.strip()}"
        schedules.append(build(task_type(), cron=expression, name=name))
    return schedules


class ScheduleSet:
    """The schedules declared on one queue, by name."""

    def __init__(self, registry: Registry) -> None:
        self.registry = registry
        self._by_name: dict[str, Schedule] = {}

    def add(self, schedule: Schedule) -> Schedule:
        """Record ``schedule``; its kind must be registered and its name unused."""
        self.registry.get(schedule.kind)  # UnknownKind naming the registered kinds
        if schedule.name in self._by_name and self._by_name[schedule.name] != schedule:
            raise InvalidOption(f"schedule {schedule.name!r} is declared twice; give each one its own name=")
        self._by_name[schedule.name] = schedule
        return schedule

    def add_task_type(self, task_type: type[Task]) -> None:
        """Record the schedules ``task_type`` declares (all validated before any is recorded)."""
        for schedule in from_task_type(task_type):
            if schedule.name in self._by_name and self._by_name[schedule.name] != schedule:
                raise InvalidOption(f"schedule {schedule.name!r} is declared twice")
        for schedule in from_task_type(task_type):
            self.add(schedule)

    def get(self, name: str) -> Schedule | None:
        return self._by_name.get(name)

    def __iter__(self) -> Iterator[Schedule]:
        return iter(self._by_name.values())

    def __len__(self) -> int:
        return len(self._by_name)

    def __bool__(self) -> bool:
        return bool(self._by_name)


class ScheduledQueue(Protocol):
    """What reconciling and firing read of a queue (:class:`venturi_sa.Queue` is one): nothing else.

    Its ``models`` (the tables), ``registry`` (the kinds it may judge),
    ``schedules`` (the declared ones), ``notify`` (whether fired jobs send
    ``NOTIFY``) and ``prefix`` (for logs and thread names).
    """

    @property
    def models(self) -> Models: ...

    @property
    def registry(self) -> Registry: ...

    @property
    def schedules(self) -> ScheduleSet: ...

    @property
    def notify(self) -> bool: ...

    @property
    def prefix(self) -> str: ...


__all__ = ["Schedule", "ScheduleSet", "ScheduledQueue", "build", "from_task_type"]
