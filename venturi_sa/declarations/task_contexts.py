"""What a task's code is handed: :class:`JobContext` in ``run``, :class:`OutcomeContext` in the outcome hooks.

These are the public names (``from venturi_sa import JobContext,
OutcomeContext``) and the types :class:`~venturi_sa.task.Task` annotates
``run``, ``on_complete``, ``on_retry`` and ``on_dead`` with.  They are
``typing.Protocol`` classes carrying the documented surface, so the task
layer names them without importing the worker: the worker's
:class:`venturi_sa.worker.context.JobContext` and
:class:`venturi_sa.worker.outcome_hooks.OutcomeContext` are what a run
actually receives, and the type checker holds them to these protocols
wherever the worker hands them to a task.  Use them in annotations; they are
not for ``isinstance`` and cannot be built.

Nothing here touches a database: what commits with what is said on each
member and done by the worker.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol

from venturi_sa.states import Outcome

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncSession
    from sqlalchemy.orm import Session


class ParentFacts(Protocol):
    """One parent of a job (``after=``), as ``ctx.parents`` gives it."""

    @property
    def id(self) -> str: ...
    @property
    def kind(self) -> str | None: ...
    @property
    def status(self) -> str | None: ...
    @property
    def result(self) -> Any:
        """What ``queue.result`` gives: None unless the parent completed."""
    @property
    def note(self) -> str | None:
        """The parent's last journal note."""


class JobContext(Protocol):
    """The run context handed to ``Task.run``: the job, its carry and one session that commits with the outcome.

    ``ctx.session`` (or ``ctx.session_async`` in an ``async def`` handler)
    is opened on first use; its transaction commits together with the run's
    outcome and rolls back with it, so a handler's database effects happen
    once, or not at all if the lease was lost or the worker crashed.  One run
    uses one of the two sessions.  Durable steps, sleeps and waits record in
    short fenced transactions of their own (docs/steps.md).
    """

    carry: Any
    """The carried state (through the task's ``Carry`` schema); assign to change it (saved with the outcome)."""
    attachment: Any
    """What :meth:`set_attachment` stored for this run's journal entry."""

    @property
    def max_payload_bytes(self) -> int:
        """The queue's bound on this run's attachment, checkpoints, carry and result."""
    @property
    def log(self) -> logging.LoggerAdapter[logging.Logger]:
        """A logger whose records carry this job's id, kind and run number."""
    @property
    def job_id(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def run_count(self) -> int:
        """How many times this job has been claimed, this run included."""
    @property
    def failure_count(self) -> int:
        """Retryable failures and stale recoveries before this run."""
    @property
    def session(self) -> Session:
        """A Session whose transaction commits with this run's outcome, and rolls back with it; never commit it."""
    @property
    def session_async(self) -> AsyncSession:
        """:attr:`session` as an ``AsyncSession``, for ``async def`` handlers (same guarantees)."""
    @property
    def parents(self) -> Sequence[ParentFacts]:
        """This job's parents (``after=``) in the order given, read in one query on first access."""
    async def parents_async(self) -> Sequence[ParentFacts]:
        """:attr:`parents` from an ``async def`` handler."""
    def iter_parents(self, batch: int = 1000) -> Iterator[ParentFacts]:
        """This job's parents in order, read ``batch`` at a time."""
    def checkpoint(self, carry: Any = ..., note: str | None = None) -> None:
        """Save ``carry`` (default: ``ctx.carry``) now, in a short fenced transaction of its own (``LeaseLost`` if
        the claim is gone); committed before it returns, whatever the run's outcome."""
    async def checkpoint_async(self, carry: Any = ..., note: str | None = None) -> None:
        """:meth:`checkpoint` from an ``async def`` handler."""
    def progress(self, done: float, total: float | None = None, message: str | None = None) -> None:
        """Checkpoint ``carry["progress"]`` (committed at once, as :meth:`checkpoint`)."""
    def set_attachment(self, obj: Any) -> None:
        """Store JSON ``obj`` on this run's journal entry, written with the outcome."""
    @property
    def lease_lost(self) -> bool:
        """True once the worker learned this run's claim is gone: nothing of the run will commit."""
    @property
    def cancelled(self) -> bool:
        """True once an operator cancelled this run: it ends ``dead`` and its session work rolls back."""
    @property
    def cancel_note(self) -> str | None: ...
    def raise_if_cancelled(self) -> None:
        """Raise ``JobCancelled`` if this run was cancelled (let it propagate)."""
    def wait_cancelled(self, timeout: float | None = None) -> bool:
        """Block up to ``timeout`` seconds for a cancel of this run; True if it came."""
    def step_key(self, name: str) -> str:
        """``"<job_id>:<name>"``: the same on every run of this job, for an idempotency key."""
    def step(self, name: str, fn: Callable[..., Any], *, transactional: bool = False) -> Any:
        """Run ``fn()`` once for this job and record its result in a fenced transaction of its own; later runs
        return the record.  With ``transactional=True``, ``fn(session)``'s writes commit with the record."""
    async def step_async(self, name: str, fn: Callable[[], Awaitable[Any]]) -> Any:
        """:meth:`step` for a coroutine function."""
    def sleep(self, delay: timedelta | float, *, name: str | None = None) -> None:
        """Sleep durably: raises ``Suspended`` (let it propagate); the run ends ``paused``, its session commits."""
    def sleep_until(self, when: datetime, *, name: str | None = None) -> None:
        """:meth:`sleep` until the aware datetime ``when``."""
    async def sleep_async(self, delay: timedelta | float, *, name: str | None = None) -> None:
        """:meth:`sleep` from an ``async def`` handler."""
    async def sleep_until_async(self, when: datetime, *, name: str | None = None) -> None:
        """:meth:`sleep_until` from an ``async def`` handler."""
    def wait_for(self, name: str, timeout: timedelta | float | None = None) -> Any:
        """The payload of signal ``name``, waiting durably for it (``Suspended``) if none is stored yet."""
    async def wait_for_async(self, name: str, timeout: timedelta | float | None = None) -> Any:
        """:meth:`wait_for` from an ``async def`` handler."""


class OutcomeContext(Protocol):
    """What an outcome hook sees: the run, its outcome and the ``session`` of the transaction recording it.

    Write the application's own rows through ``session`` and never commit
    it: they commit with the recorded outcome, once, and roll back with it
    (a hook that raises rolls the whole transaction back).  ``result`` is
    the completed run's result (its attachment), ``note`` the journal note.
    """

    @property
    def job_id(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def run_count(self) -> int: ...
    @property
    def failure_count(self) -> int: ...
    @property
    def outcome(self) -> Outcome: ...
    @property
    def note(self) -> str | None: ...
    @property
    def result(self) -> Any: ...
    @property
    def carry(self) -> Any: ...
    @property
    def session(self) -> Session: ...
    @property
    def log(self) -> logging.LoggerAdapter[logging.Logger]: ...


@dataclass(frozen=True)
class OutcomeFacts:
    """The one concrete :class:`OutcomeContext`: built by the worker for its own run's hook, and by
    :mod:`venturi_sa.owed_calls` for an owed ``on_dead`` call, from the facts each has at hand.

    It holds values only; what ``session`` commits, and when, is the builder's transaction's.
    """

    job_id: str
    kind: str
    run_count: int
    failure_count: int
    outcome: Outcome
    note: str | None
    result: Any
    carry: Any
    session: Session
    log: logging.LoggerAdapter[logging.Logger]


__all__ = ["JobContext", "OutcomeContext", "OutcomeFacts", "ParentFacts"]
