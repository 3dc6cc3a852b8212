"""What a handler sees of its job: ids, counters, carry, attachment and a session (sync or async)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from sqlalchemy.orm import Session

from venturi_sa import payloads
from venturi_sa.errors import InvalidOption
from venturi_sa.ops.dependents import ParentInfo
from venturi_sa.storage.params import ClaimedJob
from venturi_sa.worker import parents as parent_reads
from venturi_sa.worker.cancel_state import CancelState
from venturi_sa.worker.checkpoint import names_twin, with_progress
from venturi_sa.worker.durable import DurableSteps
from venturi_sa.worker.joblog import job_log
from venturi_sa.worker.run_sessions import AsyncRunSession, RunSession, SyncRunSession

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncSession

    from venturi_sa.worker.checkpoint import Checkpointer

_ONE_SESSION = ("this run already uses ctx.{used}; a run's database work goes through one session, "
                "committed together with its outcome, so use either ctx.session or ctx.session_async")


class JobContext(DurableSteps):
    """The run context handed to ``Task.run``.

    ``ctx.session`` (or, in an ``async def`` handler, ``ctx.session_async``)
    is opened on first use; its transaction is committed together with this
    run's outcome and rolled back with it, so a handler's database effects
    happen exactly once (or not at all if the lease was lost).  One run uses
    one of the two.  Durable steps, sleeps and waits (``step``, ``sleep``,
    ``wait_for``, ...) are :class:`~venturi_sa.worker.durable.DurableSteps`'.
    """

    def __init__(self, job: ClaimedJob, carry: Any, open_session: Callable[[], Session],
                 log: logging.LoggerAdapter[logging.Logger] | None = None,
                 open_async_session: Callable[[], AsyncSession] | None = None, *,
                 max_payload_bytes: int = payloads.DEFAULT_MAX_PAYLOAD_BYTES,
                 checkpointer: Checkpointer | None = None) -> None:
        self._job = job
        self.max_payload_bytes = max_payload_bytes
        """The queue's ``max_payload_bytes``: the bound on this run's attachment, checkpoints, carry and result."""
        self._open_session = open_session
        self._open_async_session = open_async_session
        self._session: Session | None = None
        self._async_session: AsyncSession | None = None
        self.carry: Any = carry
        """The carried state (through the task's ``Carry`` schema); assign to change it."""
        self.attachment: Any = None
        self._log = log  # made on first use (most runs never log): see :attr:`log`
        self._lease_lost: list[bool] = [False]  # shared with fresh() copies of this context
        self._cancel = CancelState()  # likewise shared (runtime control, see worker/cancel.py)
        self.checkpointer = checkpointer  # writes ctx.checkpoint() (worker/checkpoint.py); None: checks only
        self._parents: list[ParentInfo] | None = None  # ctx.parents, read on first use (worker/parents.py)

    @property
    def log(self) -> logging.LoggerAdapter[logging.Logger]:
        """A logger whose records carry this job's id, kind and run number."""
        log = self._log
        if log is None:
            log = self._log = job_log(self._job)
        return log

    @log.setter
    def log(self, value: logging.LoggerAdapter[logging.Logger]) -> None:
        self._log = value

    @property
    def job_id(self) -> str:
        return self._job.id

    @property
    def kind(self) -> str:
        return self._job.kind

    @property
    def run_count(self) -> int:
        """How many times this job has been claimed, this run included."""
        return self._job.run_count

    @property
    def failure_count(self) -> int:
        """Retryable failures and stale recoveries before this run."""
        return self._job.failure_count

    @property
    def session(self) -> Session:
        """A Session whose transaction commits together with this run's outcome.

        Of the worker's ``session_class`` (an SQLModel ``Session``, say).
        """
        if self._async_session is not None:
            raise InvalidOption(_ONE_SESSION.format(used="session_async"))
        if self._session is None:
            self._session = self._open_session()
        return self._session

    @property
    def session_async(self) -> AsyncSession:
        """An ``AsyncSession`` whose transaction commits together with this run's outcome.

        For ``async def`` handlers (use it on the worker's loop, i.e. inside
        the handler).  Same guarantees as :attr:`session`: committed with the
        outcome by the worker (never commit it yourself), rolled back if the
        handler raises or the lease was lost.  On a worker built with a sync
        engine it runs on the async sibling of that engine's URL; without an
        async driver installed it raises ``AsyncDriverMissing`` naming the
        extra to install.
        """
        if self._session is not None:
            raise InvalidOption(_ONE_SESSION.format(used="session"))
        if self._async_session is None:
            if self._open_async_session is None:
                raise InvalidOption("ctx.session_async is not available in this context")
            self._async_session = self._open_async_session()
        return self._async_session

    @property
    def parents(self) -> list[ParentInfo]:
        """This job's parents (``after=``) in the order given: ``ParentInfo(id, kind, status, result, note)``.

        Read in one query on first access, then kept; ``result`` is None
        unless the parent completed (read from the archive for a parent
        moved there).  See :meth:`iter_parents` for large fan-ins.
        """
        if self._parents is None:
            self._parents = parent_reads.read(self)
        return self._parents

    async def parents_async(self) -> list[ParentInfo]:
        """:attr:`parents` from an ``async def`` handler (read in a thread, so the loop is not blocked)."""
        import asyncio

        return self._parents if self._parents is not None else await asyncio.to_thread(lambda: self.parents)

    def iter_parents(self, batch: int = 1000) -> Iterator[ParentInfo]:
        """This job's parents in order, read ``batch`` at a time (one short query each), none kept."""
        return parent_reads.batches(self, batch)

    @property
    def session_used(self) -> bool:
        return self._session is not None or self._async_session is not None

    def take_session(self) -> RunSession | None:
        """Hand the run's session (if the handler opened one) to the completer."""
        session, self._session = self._session, None
        if session is not None:
            return SyncRunSession(session)
        async_session, self._async_session = self._async_session, None
        return AsyncRunSession(async_session) if async_session is not None else None

    def fresh(self) -> JobContext:
        """A new context for the same claim (carry as stored, no attachment, no session)."""
        ctx = JobContext(self._job, self._job.carry, self._open_session, self._log, self._open_async_session,
                         max_payload_bytes=self.max_payload_bytes, checkpointer=self.checkpointer)
        ctx._lease_lost = self._lease_lost
        ctx._cancel = self._cancel
        return ctx

    _KEEP: Any = object()

    @names_twin("checkpoint", "checkpoint_async")
    def checkpoint(self, carry: Any = _KEEP, note: str | None = None) -> None:
        """Save ``carry`` (default: ``ctx.carry``) now, through the task's ``Carry`` schema.

        One short transaction of its own, committed before this returns:
        ``queue.get_job(...).carry`` shows it at once, and if the worker
        dies the next run starts from it.  Fenced on this run's claim: if
        the claim is gone nothing is written and ``LeaseLost`` is raised.
        Unrelated to ``ctx.session``, whose work still commits (or rolls
        back) with the outcome.  ``note`` is logged.  One database round
        trip; in an ``async def`` handler use :meth:`checkpoint_async`.
        """
        if self.checkpointer is None:
            raise InvalidOption("ctx.checkpoint() needs a worker's run (this context has no claim to write to)")
        self.checkpointer.write(self, self.carry if carry is JobContext._KEEP else carry, note)

    async def checkpoint_async(self, carry: Any = _KEEP, note: str | None = None) -> None:
        """:meth:`checkpoint` from an ``async def`` handler (in a thread, so the loop is not blocked)."""
        import asyncio

        await asyncio.to_thread(self.checkpoint, carry, note)

    def progress(self, done: float, total: float | None = None, message: str | None = None) -> None:
        """Checkpoint ``carry["progress"] = {"done", "total", "message"}`` (the carry must be None or a dict).

        With a ``Carry`` schema, the schema needs a ``progress = fields.Dict()`` field.
        """
        schema = self.checkpointer.carry_schema if self.checkpointer is not None else None
        self.checkpoint(with_progress(self.carry, schema, done, total, message))

    @property
    def lease_lost(self) -> bool:
        """True once the worker learned this run's claim is gone (recovered, released, reclaimed).

        Nothing of the run will be committed then (fencing); a long handler
        may check this and stop early.
        """
        return self._lease_lost[0]

    def mark_lease_lost(self) -> bool:
        """Set :attr:`lease_lost` (from the lease keeper's thread); returns False if it was already set."""
        if self._lease_lost[0]:
            return False
        self._lease_lost[0] = True
        return True

    @property
    def cancelled(self) -> bool:
        """True once an operator cancelled this run (``queue.cancel``), as its worker learned it.

        The run then ends ``dead`` with the cancel note, whatever the handler
        returns, and its ``ctx.session`` work is rolled back; a long handler
        checks this (or calls :meth:`raise_if_cancelled`) and stops early.
        """
        return self._cancel.is_set

    @property
    def cancel_note(self) -> str | None:
        """The journal note of the cancel ("cancelled by <actor> while running: <note>"), once cancelled."""
        return self._cancel.note

    def raise_if_cancelled(self) -> None:
        """Raise ``JobCancelled`` if this run was cancelled (let it propagate)."""
        self._cancel.raise_if_set()

    def wait_cancelled(self, timeout: float | None = None) -> bool:
        """Block up to ``timeout`` seconds for a cancel of this run; True if it came (a cancellable sleep)."""
        return self._cancel.wait(timeout)

    @property
    def cancel_state(self) -> CancelState:
        """The run's cancel state (shared with this claim's reruns), for the worker."""
        return self._cancel

    def mark_cancelled(self, note: str) -> bool:
        """Record a cancel (from the lease keeper's thread); False if it was recorded already."""
        return self._cancel.mark(note)

    def set_attachment(self, obj: Any) -> None:
        """Store ``obj`` (JSON) on this run's journal entry (written with the outcome).

        Raises ``InvalidPayload`` if it is not JSON or is over the queue's
        ``max_payload_bytes``; the attachment is then unchanged.
        """
        self.attachment = payloads.ensure_json(obj, "attachment", self.max_payload_bytes)
