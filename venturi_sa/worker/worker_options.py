"""``WorkerOptions``: how a worker claims, runs and stops, checked in one place.

A frozen dataclass: build it once (in configuration, a ``WorkerApp``, a
supervisor's parent process) and hand it to ``Worker(queue, engine,
options=...)``; the keyword form ``Worker(queue, engine, concurrency=4)``
builds the same object.  The engines are not options: the worker's
``engine``, ``sync_engine`` and ``async_engine`` stay arguments of
``Worker`` (they belong to the process that connects).  Defaults that
depend on the process (``worker_id``: ``host:pid``) or on another option
(``max_backlog``: ``max(4 x concurrency, 100)``) are resolved by the worker.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, TypedDict

from venturi_sa.errors import InvalidOption
from venturi_sa.run_hooks import AroundRun, LifecycleHook, RunHooks

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncSession
    from sqlalchemy.orm import Session

EventHook = Callable[[str, dict[str, Any]], None]
LifecycleHooks = LifecycleHook | Sequence[LifecycleHook] | None
AroundRuns = AroundRun | Sequence[AroundRun] | None


@dataclass(frozen=True, kw_only=True)
class WorkerOptions:
    """A worker's options; each bad value raises ``InvalidOption`` when the object is built.

    ``kinds`` limits the worker to some task kinds (default: all registered);
    ``concurrency`` is the number of jobs run at once; ``poll_interval`` the
    longest idle sleep; ``batch_size`` the most jobs claimed in one round
    trip; ``listen=False`` disables LISTEN/NOTIFY (e.g. behind a
    transaction-pooling proxy) and relies on polling alone; ``grace`` is how
    long a stop waits for running jobs before releasing them;
    ``recover_interval`` how often expired leases are looked for;
    ``worker_id`` is stored as ``claimed_by`` (default ``host:pid``);
    ``batch_outcomes=False`` writes each outcome in its own transaction;
    ``fetch_cooldown`` the longest a freed slot waits for a claim while more
    work is eligible; ``max_backlog`` how many finished runs may wait for
    their outcome write before the worker stops claiming (default
    ``max(4 * concurrency, 100)``); ``connect_timeout`` how long start waits
    for a server that is starting, stopping or unreachable.
    ``session_class`` / ``async_session_class`` are the classes of
    ``ctx.session`` / ``ctx.session_async``; ``on_event``, ``on_start``,
    ``on_stop`` and ``around_run`` are the hooks (see :class:`~venturi_sa.Worker`).
    """

    kinds: Sequence[str] | None = None
    concurrency: int = 10
    poll_interval: float = 5.0
    batch_size: int = 100
    listen: bool = True
    grace: float = 30.0
    recover_interval: float = 10.0
    worker_id: str | None = None
    batch_outcomes: bool = True
    fetch_cooldown: float = 0.1
    max_backlog: int | None = None
    connect_timeout: float = 60.0
    session_class: type[Session] | None = None
    async_session_class: type[AsyncSession] | None = None
    on_event: EventHook | None = None
    on_start: LifecycleHooks = None
    on_stop: LifecycleHooks = None
    around_run: AroundRuns = None

    def __post_init__(self) -> None:
        if self.concurrency < 1:
            raise InvalidOption(f"concurrency must be >= 1, got {self.concurrency}")
        if self.poll_interval <= 0:
            raise InvalidOption(f"poll_interval must be > 0, got {self.poll_interval}")
        if self.fetch_cooldown < 0:
            raise InvalidOption(f"fetch_cooldown must be >= 0, got {self.fetch_cooldown}")
        if self.max_backlog is not None and self.max_backlog < 1:
            raise InvalidOption(f"max_backlog must be >= 1, got {self.max_backlog}")
        if isinstance(self.kinds, str):
            raise InvalidOption(f"kinds takes a list of kinds, got the string {self.kinds!r}")
        if self.kinds is not None:
            object.__setattr__(self, "kinds", tuple(self.kinds))
        self.hooks()  # InvalidOption now for a hook that is not callable

    def hooks(self) -> RunHooks:
        """``on_start``, ``on_stop`` and ``around_run`` as a :class:`~venturi_sa.run_hooks.RunHooks`."""
        return RunHooks.of(self.on_start, self.on_stop, self.around_run)

    @classmethod
    def merged(cls, options: WorkerOptions | None, keywords: Mapping[str, Any]) -> WorkerOptions:
        """``options``, or the options the ``keywords`` name; ``InvalidOption`` if both are given.

        The keyword form builds a new object (so its values are checked the
        same way); with ``options=``, every option is already set there, so
        a keyword for one of them is refused, naming it.
        """
        if options is None:
            return cls(**keywords)
        if not isinstance(options, WorkerOptions):
            raise InvalidOption(f"options takes a venturi_sa.WorkerOptions, got {type(options).__name__}")
        both = sorted(name for name in keywords if name in OPTION_NAMES)
        if both:
            named = ", ".join(f"{name}=" for name in both)
            raise InvalidOption(f"Worker() got options= and {named}: set {', '.join(both)} in the WorkerOptions "
                                f"(dataclasses.replace(options, {both[0]}=...)), not both")
        if keywords:
            return cls(**keywords)  # not options: a TypeError naming the unexpected keyword
        return options


OPTION_NAMES = frozenset(f.name for f in fields(WorkerOptions))


class WorkerKeywords(TypedDict, total=False):
    """The keyword form of :class:`WorkerOptions`, for ``Worker(queue, engine, concurrency=4, ...)``."""

    kinds: Sequence[str] | None
    concurrency: int
    poll_interval: float
    batch_size: int
    listen: bool
    grace: float
    recover_interval: float
    worker_id: str | None
    batch_outcomes: bool
    fetch_cooldown: float
    max_backlog: int | None
    connect_timeout: float
    session_class: type[Session] | None
    async_session_class: type[AsyncSession] | None
    on_event: EventHook | None
    on_start: LifecycleHooks
    on_stop: LifecycleHooks
    around_run: AroundRuns
