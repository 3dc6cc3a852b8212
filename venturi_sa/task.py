"""The task model: a task type is a ``KIND``, a payload schema and a policy.

Subclass :class:`Task` once per kind of work::

    class SendReceipt(Task):
        KIND = "send_receipt"

        class Payload(Schema):
            order_id = fields.Integer(required=True)

        max_failures = 5

        def run(self, ctx):
            mail_receipt(self.payload["order_id"])

``SendReceipt(order_id=7)`` validates the fields through ``Payload`` at once
and raises :class:`~venturi_sa.errors.InvalidPayload` naming a bad field.
The worker rebuilds the task from the stored JSON with the same schema.

``run`` may be an ``async def``: the worker then awaits it on its event loop
(one per worker process, in its own thread) from the executor thread that
holds the run's slot, so caps, outcomes and shutdown are the same as for a
plain ``run``; ``ctx.session_async`` is its ``AsyncSession``.
"""

from __future__ import annotations

import difflib
import enum
import inspect
import re
from collections.abc import Callable, Iterable
from datetime import timedelta
from typing import TYPE_CHECKING, Any, ClassVar

from marshmallow import Schema

from venturi_sa import payloads
from venturi_sa.declarations.limit_rules import MAX_COUNT, KindLimits, Rate, check_limits
from venturi_sa.declarations.merge_rules import Coalesce, Debounce, MergeDecision, check_policies
from venturi_sa.declarations.task_contexts import JobContext, OutcomeContext
from venturi_sa.declarations.time_checks import check_timeout
from venturi_sa.errors import DuplicateKind, InvalidOption, InvalidPayload, UnknownKind

if TYPE_CHECKING:
    from venturi_sa.models import JobBase

Handler = Callable[[Any, JobContext], object]
"""What :func:`task` decorates: ``fn(payload, ctx)``, plain or ``async def``.

It returns an outcome, ``None`` (``Complete()``) or any JSON value (the job's result).
"""

KIND_PATTERN = re.compile(r"[A-Za-z0-9_.:\-/]{1,200}")
MAX_BACKOFF = timedelta(hours=1)


class Priority(enum.IntEnum):
    """Priority tiers; lower runs first."""

    HIGH = 0
    NORMAL = 1
    LOW = 2


class EmptyPayload(Schema):
    """The payload schema of a task that takes no fields."""


def check_priority(value: object, field: str = "priority") -> Priority:
    """Return ``value`` as a :class:`Priority`, or raise ``InvalidOption`` naming ``field``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidOption(f"{field} must be Priority.HIGH/NORMAL/LOW (0, 1, 2), got {value!r}")
    try:
        return Priority(value)
    except ValueError:
        raise InvalidOption(f"{field} must be 0 (HIGH), 1 (NORMAL) or 2 (LOW), got {value!r}") from None


MAX_LEASE = timedelta(days=1)
"""The longest ``Task.lease``: a worker that dies holds its jobs this long before they are recovered."""


class Task:
    """Base class of every task type.  Subclasses set ``KIND`` and ``Payload``.

    Class policy (override on the subclass):

    * ``priority`` -- default tier for new jobs (``Priority.NORMAL``).
    * ``max_failures`` -- the backstop: the failure that reaches it makes the job ``dead``.
    * ``lease`` -- how long a claim lasts without renewal; the worker renews it while running.
    * ``concurrency`` -- per-worker cap on running jobs of this kind (``None``: no cap).
    * ``timeout`` -- longest a run may take (``None``: no limit); past it the run is
      cancelled cooperatively (``ctx.cancelled``), an async one's task too, and it
      ends as a retryable failure (see ``docs/tasks.md``).
    * ``backoff(failure_count)`` -- delay before a retry becomes eligible.
    * ``debounce`` / ``throttle`` -- when the jobs of one ``dedup_key`` run (docs/debounce.md).
    * ``global_concurrency``, ``limit_key()`` with ``key_concurrency``, ``rate_limit``, ``key_rate_limit``
      -- limits across every worker (docs/limits.md).
    """

    KIND: ClassVar[str]
    Payload: ClassVar[type[Schema]] = EmptyPayload
    Carry: ClassVar[type[Schema] | None] = None
    priority: ClassVar[int] = Priority.NORMAL
    max_failures: ClassVar[int] = 5
    lease: ClassVar[timedelta] = timedelta(seconds=60)
    concurrency: ClassVar[int | None] = None
    schedule: ClassVar[str | list[str] | None] = None
    """Cron expression(s) (UTC) at which a job of this kind with an empty payload is inserted (docs/periodic.md)."""
    timeout: ClassVar[timedelta | None] = None
    debounce: ClassVar[Debounce | None] = None  # keyed by dedup_key (declarations/merge_rules.py, docs/debounce.md)
    throttle: ClassVar[timedelta | None] = None  # one start per window per dedup_key (same)
    global_concurrency: ClassVar[int | None] = None  # limits across every worker: docs/limits.md
    key_concurrency: ClassVar[int | None] = None
    rate_limit: ClassVar[Rate | None] = None
    key_rate_limit: ClassVar[Rate | None] = None

    payload_schema: ClassVar[Schema]
    carry_schema: ClassVar[Schema | None]
    is_async: ClassVar[bool] = False
    """True when ``run`` is an ``async def`` (the worker awaits it on its event loop)."""
    payload: Any

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.payload_schema = cls.Payload()
        cls.carry_schema = cls.Carry() if cls.Carry is not None else None
        cls.is_async = inspect.iscoroutinefunction(cls.run)
        if "KIND" in cls.__dict__:
            _check_policy(cls)

    def __init__(self, **fields: Any) -> None:
        """Validate ``fields`` through the ``Payload`` schema (raises ``InvalidPayload``)."""
        schema = self.payload_schema
        if payloads.unchanged_by(schema, fields):  # what load() would return, without naming the payload first
            self.payload = fields  # a dict of this call's own (** always builds a new one)
            return
        self.payload = payloads.load(schema, fields, f"payload of {self.kind_name()!r}")

    @classmethod
    def kind_name(cls) -> str:
        return getattr(cls, "KIND", cls.__name__)

    @classmethod
    def from_stored(cls, data: Any) -> Task:
        """Rebuild a task from its stored JSON payload (raises ``InvalidPayload``)."""
        if not isinstance(data, dict):
            raise InvalidPayload(
                f"stored payload of {cls.kind_name()!r} is {type(data).__name__}, not an object"
            )
        return cls(**data)

    def stored_payload(self) -> Any:
        """The JSON form of this task's payload, as it is written to the jobs row."""
        return payloads.dump(self.payload_schema, self.payload, f"payload of {self.kind_name()!r}")

    @classmethod
    def backoff(cls, failure_count: int) -> timedelta:
        """Delay before retry number ``failure_count``: 2^n seconds, at most an hour."""
        return min(timedelta(seconds=2 ** min(failure_count, 20)), MAX_BACKOFF)

    def dedup_key(self) -> str | None:
        """A key under which pending jobs of this kind are merged; ``None`` never merges."""
        return None

    def limit_key(self) -> str | None:
        """The key this job's key limits and fair claims go by, stored at insert; ``None``: no key."""
        return None

    def merge(self, existing: JobBase) -> MergeDecision:
        """Decide what happens to this task given the oldest pending sibling.

        The default coalesces and keeps the existing payload.
        """
        return Coalesce(existing.payload)

    def run(self, ctx: JobContext) -> object:
        """Do the work; may be ``async def``.

        Return an outcome (``None`` means ``Complete()``) or any JSON value:
        the job's result, recorded as ``Complete`` with the value as the
        run's journal attachment (it replaces one set with
        ``ctx.set_attachment``) and read back with ``queue.result(...)``.
        Any value ``json.dumps`` accepts is a result (a tuple is stored as
        an array); one it cannot store completes the job without a result,
        with a WARNING and a journal note, and is never retried.
        """
        raise NotImplementedError(f"{type(self).__name__}.run is not implemented")

    # Outcome hooks (run by venturi_sa/worker/outcome_hooks.py and venturi_sa/owed_calls.py): override to change the
    # application's own rows in the very transaction that records the outcome.
    def on_complete(self, ctx: OutcomeContext, result: Any) -> None:
        """Called in the transaction recording ``completed``, after its fenced write; ``ctx.session`` is it.

        Commits with the outcome, never without it; not called if the lease
        was lost.  Raising rolls everything back and records a retryable failure.
        """

    def on_retry(self, ctx: OutcomeContext, note: str | None) -> None:
        """Called in the transaction recording ``retried`` (same guarantees as :meth:`on_complete`)."""

    def on_dead(self, ctx: OutcomeContext, note: str | None) -> None:
        """Called for every transition of the job to ``dead``, whoever makes it; its session writes commit once.

        A worker's own run calls it in the transaction recording ``dead``
        (same guarantees as :meth:`on_complete`).  An operator's
        ``kill``/``cancel`` through a queue that has this task calls it in the
        action's transaction.  Any other transition (a stale recovery at the
        backstop, a cancel its run never read, an action without this task's
        code) leaves a durable record that the next worker of this kind
        makes, in the transaction that deletes the record; there, raising
        rolls the call back and it is retried later (so effects outside the
        database may repeat).  A record still owed when cleanup deletes its
        job (no worker of the kind ran before then) goes with the job.
        """


def _check_policy(cls: type[Task]) -> None:
    kind = cls.__dict__["KIND"]
    if not isinstance(kind, str) or not KIND_PATTERN.fullmatch(kind):
        raise InvalidOption(
            f"{cls.__name__}.KIND must be 1-200 characters of letters, digits and _.:-/, got {kind!r}"
        )
    check_priority(cls.priority, f"{cls.__name__}.priority")
    if isinstance(cls.max_failures, bool) or not isinstance(cls.max_failures, int) \
            or not 1 <= cls.max_failures <= MAX_COUNT:
        raise InvalidOption(f"{cls.__name__}.max_failures must be an integer from 1 to {MAX_COUNT}")
    if not isinstance(cls.lease, timedelta) or not timedelta(seconds=1) <= cls.lease <= MAX_LEASE:
        raise InvalidOption(f"{cls.__name__}.lease must be a timedelta of 1 second to 1 day, got {cls.lease!r}")
    if cls.concurrency is not None and (not isinstance(cls.concurrency, int) or not 1 <= cls.concurrency <= MAX_COUNT):
        raise InvalidOption(f"{cls.__name__}.concurrency must be None or an integer from 1 to {MAX_COUNT}")
    check_timeout(cls.timeout, f"{cls.__name__}.timeout")
    check_policies(cls.__name__, cls.debounce, cls.throttle, keyed=cls.dedup_key is not Task.dedup_key)
    check_limits(cls.__name__, declared_limits(cls))


def is_keyed(cls: type[Task]) -> bool:
    """True if ``cls`` overrides ``Task.limit_key`` (its key limits and fair claims go by that key)."""
    return cls.limit_key is not Task.limit_key


def declared_limits(cls: type[Task]) -> KindLimits:
    """The limits ``cls`` declares, as written on the class (checked when it was defined)."""
    return KindLimits(global_concurrency=cls.global_concurrency, key_concurrency=cls.key_concurrency,
                      rate_limit=cls.rate_limit, key_rate_limit=cls.key_rate_limit, keyed=is_keyed(cls))


def declared_limits_of(tasks: Iterable[type[Task]]) -> dict[str, KindLimits]:
    """``kind -> KindLimits`` of the tasks that declare a limit or a limit key."""
    found = {t.KIND: declared_limits(t) for t in tasks}
    return {kind: limits for kind, limits in found.items() if limits.any}


POLICY_KEYS = ("priority", "max_failures", "lease", "concurrency", "timeout", "backoff", "dedup_key", "schedule",
               "debounce", "throttle", "global_concurrency", "key_concurrency", "rate_limit", "key_rate_limit",
               "limit_key")
"""The policy keyword arguments :func:`task` and ``Queue.task`` accept."""


def check_policy_keys(policy: dict[str, Any], call: str = "task") -> None:
    """Raise ``InvalidOption`` naming each unknown policy key, the valid ones and a close match."""
    unknown = [name for name in policy if name not in POLICY_KEYS]
    if not unknown:
        return
    hints = []
    for name in unknown:
        close = difflib.get_close_matches(name, POLICY_KEYS, n=1)
        hints.append(f"{name!r} (did you mean {close[0]!r}?)" if close else repr(name))
    plural = "s" if len(unknown) > 1 else ""
    raise InvalidOption(
        f"{call}() got unknown policy key{plural} {', '.join(hints)}; "
        f"valid keys: payload, carry, {', '.join(POLICY_KEYS)}"
    )


def task(
    kind: str,
    *,
    payload: type[Schema] = EmptyPayload,
    carry: type[Schema] | None = None,
    **policy: Any,
) -> Callable[[Handler], type[Task]]:
    """Decorate ``fn(payload, ctx)`` (plain or ``async def``) to make it a :class:`Task` type of ``kind``.

    ``policy`` takes the class attributes of :class:`Task` (``priority``,
    ``max_failures``, ``lease``, ``concurrency``) and ``backoff``/``dedup_key``
    callables.  The result is an ordinary ``Task`` subclass.  An unknown
    policy key raises ``InvalidOption`` at once, naming it, the valid keys
    and the closest one.
    """
    check_policy_keys(policy)

    def wrap(fn: Handler) -> type[Task]:
        run: Callable[[Task, JobContext], Any]
        if inspect.iscoroutinefunction(fn):
            async def run(self: Task, ctx: JobContext) -> object:
                return await fn(self.payload, ctx)
        else:
            def run(self: Task, ctx: JobContext) -> Any:
                return fn(self.payload, ctx)

        namespace: dict[str, Any] = {"KIND": kind, "Payload": payload, "Carry": carry, "run": run}
        for name, value in policy.items():
            if name == "backoff":
                namespace[name] = classmethod(lambda cls, n, _f=value: _f(n))
            elif name in ("dedup_key", "limit_key"):
                namespace[name] = lambda self, _f=value: _f(self.payload)
            else:
                namespace[name] = value
        namespace["__doc__"] = fn.__doc__
        namespace["__module__"] = fn.__module__
        return type(fn.__name__, (Task,), namespace)

    return wrap


class Registry:
    """kind -> task type.  Registering one kind twice is an error."""

    def __init__(self, tasks: list[type[Task]] | tuple[type[Task], ...] = ()) -> None:
        self._tasks: dict[str, type[Task]] = {}
        for task_type in tasks:
            self.register(task_type)

    def register(self, task_type: type[Task]) -> type[Task]:
        if not (isinstance(task_type, type) and issubclass(task_type, Task)) or "KIND" not in vars(task_type):
            raise InvalidOption(f"{task_type!r} is not a Task subclass with a KIND")
        kind = task_type.KIND
        if kind in self._tasks and self._tasks[kind] is not task_type:
            raise DuplicateKind(
                f"kind {kind!r} is registered twice ({self._tasks[kind].__qualname__} and "
                f"{task_type.__qualname__}); each kind needs exactly one task type"
            )
        self._tasks[kind] = task_type
        return task_type

    def get(self, kind: str) -> type[Task]:
        try:
            return self._tasks[kind]
        except KeyError:
            raise UnknownKind(
                f"unknown task kind {kind!r}; registered kinds: {', '.join(sorted(self._tasks)) or 'none'}"
            ) from None

    def __contains__(self, kind: object) -> bool:
        return kind in self._tasks

    @property
    def kinds(self) -> list[str]:
        return sorted(self._tasks)

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self._tasks.values())
