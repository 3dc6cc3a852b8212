"""Durable steps, sleeps and waits of a handler: ``ctx.step``, ``ctx.sleep``, ``ctx.wait_for`` and twins.

A job's handler runs again from the top on every run; what it recorded is
replayed by name.  Each record is one short transaction of its own,
committed before the call returns, through the run's store (the
``DurableBackend`` verbs of ``storage/durable_backend.py``, in the
transactions ``ctx.checkpoint`` uses: the worker's engine, or a
``MemoryBackend`` in tests), fenced on the run's claim: a run whose claim
is gone (a zombie) records nothing and gets
:class:`~venturi_sa.errors.LeaseLost`.  A transaction that fails rolls its
record back (the step runs again); a crash after the commit keeps it.  The
records are read once per run, on the first call (a handler that calls
none of these pays nothing).  A run without a store
(``venturi_sa.testing.perform``) records nothing.

- ``ctx.step(name, fn)`` returns the recorded result of ``name`` without
  calling ``fn``, or calls ``fn()`` and records what it returned (JSON; None
  is JSON null) once it has returned.  If ``fn`` raises nothing is recorded
  (and the same run may call that step again).
  With ``transactional=True``, ``fn(session)`` runs in the record's own
  transaction, so its database writes commit with the record, exactly once
  (a store without SQLAlchemy transactions, ``MemoryBackend``, refuses it
  with ``InvalidOption`` before ``fn`` runs).
- ``ctx.sleep`` / ``ctx.sleep_until`` record the wake time on the database
  clock when first reached, and raise :class:`~venturi_sa.errors.Suspended`
  until it has passed.
- ``ctx.wait_for(name, timeout)`` records the deadline when first reached,
  and resolves it with the payload of a signal stored before the deadline
  (returned on this and every later run) or the deadline's passing
  (``TimeoutError``, likewise; ``queue.signal`` refuses a signal at or
  after the deadline); otherwise it raises ``Suspended``.

A name is used once per run (steps, sleeps and waits share a job's names); a second use raises
``InvalidOption``.  Unnamed sleeps are named ``sleep#1``, ``sleep#2``, ... in the order reached.
An ``async def`` handler awaits the ``*_async`` twins (docs/steps.md).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection
from sqlalchemy.orm import Session

from venturi_sa import payloads
from venturi_sa.declarations.time_checks import MAX_DELAY, check_run_at
from venturi_sa.errors import InvalidOption, LeaseLost, Suspended
from venturi_sa.states import Outcome
from venturi_sa.storage.backend import Tx
from venturi_sa.storage.durable_backend import WorkerBackend
from venturi_sa.storage.durable_params import (
    RecordStepParams,
    SleepParams,
    StepInfo,
    StepsParams,
    WaitParams,
    WakeWaitParams,
)
from venturi_sa.storage.params import ClaimedJob, FinishParams
from venturi_sa.worker.checkpoint import names_twin

if TYPE_CHECKING:
    from venturi_sa.worker.checkpoint import Checkpointer

NAME_LIMIT = 200
"""The longest step, sleep or wait name."""


@dataclass
class DurableState:
    """What one execution of a handler learned and used of its job's records."""

    records: dict[str, StepInfo] | None = None  # None until first needed
    now: datetime | None = None  # the database clock when the records were read
    used: set[str] = field(default_factory=set)
    sleeps: int = 0


class _FencedOut(Exception):  # noqa: N818 - internal: a transactional step's fence failed, roll it back
    pass


def _seconds(value: object, what: str, positive: bool = False) -> timedelta:
    """``value`` as a timedelta in [0, ``MAX_DELAY``] (100 years), as ``delay=`` is bounded; else ``InvalidOption``."""
    if isinstance(value, timedelta):
        delay = value
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            delay = timedelta(seconds=value)
        except (OverflowError, ValueError):  # past timedelta's range, or NaN
            raise InvalidOption(f"{what} must be at most {MAX_DELAY.days} days (100 years), got {value!r:.80}") from None  # noqa: E501
    else:
        raise InvalidOption(f"{what} must be a datetime.timedelta or a number of seconds, got {value!r:.80}")
    if delay < timedelta(0) or (positive and delay == timedelta(0)):
        raise InvalidOption(f"{what} must be {'positive' if positive else 'non-negative'}, got {value!r:.80}")
    if delay > MAX_DELAY:
        raise InvalidOption(f"{what} must be at most {MAX_DELAY.days} days (100 years), got {value!r:.80}")
    return delay


class DurableSteps:
    """The durable methods of :class:`~venturi_sa.worker.context.JobContext` (see the module)."""

    _job: ClaimedJob
    checkpointer: Checkpointer | None
    max_payload_bytes: int
    suspension: Suspended | None = None
    """The ``Suspended`` this run raised (a sleep or wait reached), if any: its outcome is ``paused``.

    A class attribute until a suspension sets it: the worker's check of a run is an attribute read."""

    def mark_lease_lost(self) -> bool:
        raise NotImplementedError  # JobContext's

    @property
    def _durable(self) -> DurableState:
        state: DurableState | None = self.__dict__.get("_durable_state")
        if state is None:
            state = self.__dict__["_durable_state"] = DurableState()
        return state

    def step_key(self, name: str) -> str:
        """``"<job_id>:<name>"``: the same on every run of this job, for a provider's idempotency key."""
        return f"{self._job.id}:{_check_name(name)}"

    # -- where records are written ------------------------------------------------------------
    def _store(self) -> WorkerBackend | None:
        """The run's store (the ``DurableBackend`` verbs), or None for a run without one (nothing recorded)."""
        checkpointer = self.checkpointer
        if checkpointer is None:
            raise InvalidOption("ctx.step() and friends need a worker's run (this context has no claim)")
        if checkpointer.begin is None or checkpointer.backend is None:
            return None  # a run without a store (venturi_sa.testing.perform): nothing is recorded
        return checkpointer.backend

    def _tx(self, fn: Callable[[Tx], Any]) -> Any:
        checkpointer = self.checkpointer
        assert checkpointer is not None and checkpointer.begin is not None
        return checkpointer.begin(fn)

    def _fenced(self, written: Any) -> Any:
        if written is None:
            self.mark_lease_lost()
            fence = self._job.fence
            raise LeaseLost(f"job {fence.job_id} run {fence.run_count} no longer holds its claim: nothing was "
                            "recorded, and the run's outcome will not be recorded")
        return written

    def _use(self, name: str) -> None:
        state = self._durable
        if name in state.used:
            raise InvalidOption(f"the name {name!r} is used twice in this run: each step, sleep and wait of "
                                "a job needs a name of its own")
        state.used.add(name)

    def _recorded(self, name: str) -> StepInfo | None:
        state = self._durable
        if state.records is None:
            backend = self._store()
            if backend is None:
                state.records = {}
            else:
                read = self._tx(lambda tx: backend.read_steps(tx, StepsParams(job_id=self._job.id)))
                state.records, state.now = dict(read.records), read.now
        return state.records.get(name)

    def _keep(self, record: StepInfo, now: datetime | None = None) -> StepInfo:
        state = self._durable
        assert state.records is not None
        state.records[record.name] = record
        if now is not None:
            state.now = now
        return record

    # -- steps --------------------------------------------------------------------------------
    @names_twin("step", "step_async")
    def step(self, name: str, fn: Callable[..., Any], *, transactional: bool = False) -> Any:
        """Run ``fn()`` once for this job and record its JSON result; on later runs return the record.

        The record is written, fenced on this run's claim, in a short
        transaction of its own right after ``fn`` returns (``LeaseLost`` if
        the claim is gone: nothing recorded).  If ``fn`` raises, nothing is
        recorded and it runs again on the next run; a result that is not
        JSON raises ``InvalidPayload`` (a retryable failure).  With
        ``transactional=True`` it calls ``fn(session)``, a Session in the
        record's transaction: its writes commit with the record or not at all.
        An external call in ``fn`` can run more than once (a crash before the
        record): pass ``ctx.step_key(name)`` as its idempotency key.
        """
        self._use(_check_name(name))
        try:
            recorded = self._replayed(name, "step")
            if recorded is not None:
                return recorded.result
            started = time.monotonic()
            if transactional:
                return self._transactional(name, fn, started)
            return self._record(name, fn(), started)
        except BaseException:
            self._durable.used.discard(name)  # nothing recorded: this run may call the step again
            raise

    async def step_async(self, name: str, fn: Callable[[], Awaitable[Any]]) -> Any:
        """:meth:`step` for a coroutine function: ``await fn()`` once, record its result (in a thread)."""
        self._use(_check_name(name))
        try:
            recorded = await asyncio.to_thread(self._replayed, name, "step")
            if recorded is not None:
                return recorded.result
            started = time.monotonic()
            value = await fn()
            return await asyncio.to_thread(self._record, name, value, started)
        except BaseException:
            self._durable.used.discard(name)  # nothing recorded: this run may call the step again
            raise

    def _replayed(self, name: str, entry: str) -> StepInfo | None:
        record = self._recorded(name)
        if record is not None and record.entry != entry:
            raise InvalidOption(f"{name!r} names a {record.entry} of this job, not a {entry}: a name must "
                                "mean the same thing on every run")
        return record

    def _stored(self, name: str, value: Any) -> Any:
        return payloads.ensure_json(value, f"the result of step {name!r}", self.max_payload_bytes)

    def _record(self, name: str, value: Any, started: float) -> Any:
        stored = self._stored(name, value)
        backend = self._store()
        if backend is None:
            return stored
        params = RecordStepParams(fence=self._job.fence, name=name, result=stored, elapsed=time.monotonic() - started)
        record = self._fenced(self._tx(lambda tx: backend.record_step(tx, params)))
        return self._keep(record).result

    def _transactional(self, name: str, fn: Callable[[Session], Any], started: float) -> Any:
        backend = self._store()
        if backend is None:
            raise InvalidOption("ctx.step(..., transactional=True) needs a database (this run has none)")
        fence = self._job.fence

        def work(runner: Tx) -> StepInfo:
            if not isinstance(runner, (Session, Connection)):  # refused before fn runs: nothing is recorded
                raise InvalidOption(f"ctx.step(..., transactional=True) calls fn(session) in the record's "
                                    f"SQLAlchemy transaction, which this run's store ({type(backend).__name__}) "
                                    "does not have")
            session = runner if isinstance(runner, Session) else Session(bind=runner)  # joins its transaction
            try:
                stored = self._stored(name, fn(session))
                session.flush()
            finally:
                if session is not runner:
                    session.close()
            # the job row is locked (FOR KEY SHARE) only now, for the record: not while fn runs
            record = backend.record_step(runner, RecordStepParams(fence=fence, name=name, result=stored,
                                                                  elapsed=time.monotonic() - started))
            if record is None:
                raise _FencedOut  # rolls fn's writes back with the transaction
            return record

        try:
            recorded = self._tx(work)
        except _FencedOut:
            recorded = None
        return self._keep(self._fenced(recorded)).result

    # -- sleeps -------------------------------------------------------------------------------
    @names_twin("sleep", "sleep_async")
    def sleep(self, delay: timedelta | float, *, name: str | None = None) -> None:
        """Sleep durably for ``delay`` (a timedelta or seconds) from the first time this sleep is reached.

        Raises ``Suspended`` (let it propagate): the run ends ``paused`` with
        no slot held and no failure counted, and the job runs again from the
        top once the wake time (recorded on the database clock) has passed,
        when this returns at once.  ``ctx.session`` commits with the pause.
        A ``delay`` over 100 years (``MAX_DELAY``, as for ``delay=``) raises
        ``InvalidOption`` before anything is recorded.
        """
        checked = _seconds(delay, "ctx.sleep(delay)")  # before the name is taken: a refusal uses nothing
        self._sleep(self._sleep_name(name), checked, None)

    @names_twin("sleep_until", "sleep_until_async")
    def sleep_until(self, when: datetime, *, name: str | None = None) -> None:
        """:meth:`sleep` until ``when`` (a timezone-aware datetime); returns at once once it has passed."""
        if not isinstance(when, datetime) or when.utcoffset() is None:
            raise InvalidOption(f"ctx.sleep_until(when) needs a timezone-aware datetime, got {when!r:.80}")
        check_run_at(when, "ctx.sleep_until(when)", past=False)  # at most 100 years ahead, as run_at=
        self._sleep(self._sleep_name(name), None, when)

    async def sleep_async(self, delay: timedelta | float, *, name: str | None = None) -> None:
        """:meth:`sleep` from an ``async def`` handler (its database work in a thread)."""
        await asyncio.to_thread(self.sleep, delay, name=name)

    async def sleep_until_async(self, when: datetime, *, name: str | None = None) -> None:
        """:meth:`sleep_until` from an ``async def`` handler."""
        await asyncio.to_thread(self.sleep_until, when, name=name)

    def _sleep_name(self, name: str | None) -> str:
        if name is not None:
            return _check_name(name)
        state = self._durable
        state.sleeps += 1
        return f"sleep#{state.sleeps}"

    def _sleep(self, name: str, delay: timedelta | None, until: datetime | None) -> None:
        self._use(name)
        record = self._replayed(name, "sleep")
        now = self._durable.now
        if record is None:
            backend = self._store()
            if backend is None:  # no store (testing.perform): reported as a pause, nothing recorded
                raise self._suspend(Suspended("sleep", name, until, f"sleeping ({name})"))
            params = SleepParams(fence=self._job.fence, name=name, delay=delay, until=until)
            reached = self._fenced(self._tx(lambda tx: backend.reach_sleep(tx, params)))
            record, now = self._keep(reached.record, reached.now), reached.now
        assert record.wake_at is not None
        if now is not None and record.wake_at <= now:
            return
        raise self._suspend(Suspended("sleep", name, record.wake_at,
                                      f"sleeping until {record.wake_at.isoformat()} ({name})"))

    def _suspend(self, exc: Suspended) -> Suspended:
        self.suspension = exc
        return exc

    # -- waits --------------------------------------------------------------------------------
    @names_twin("wait_for", "wait_for_async")
    def wait_for(self, name: str, timeout: timedelta | float | None = None) -> Any:
        """Return the payload of signal ``name`` for this job, waiting durably for it if none is stored.

        The deadline (now + ``timeout`` on the database clock; none without a
        timeout) is recorded the first time this is reached.  A stored signal
        is returned at once; past the deadline ``TimeoutError`` is raised;
        either resolution is recorded and repeated on every later run.
        Otherwise raises ``Suspended`` (let it propagate): the run ends
        ``paused`` and the job stays pending, holding no slot, until the
        signal commits (``queue.signal``) or the deadline passes.  Give every
        wait a timeout; one over 100 years (``MAX_DELAY``) raises
        ``InvalidOption`` before anything is recorded.
        """
        limit = None if timeout is None else _seconds(timeout, "ctx.wait_for(timeout)")
        self._use(_check_name(name))
        record = self._replayed(name, "wait")
        if record is None or record.resolution is None:
            backend = self._store()
            if backend is None:  # no store (testing.perform): reported as a pause, nothing recorded
                raise self._suspend(Suspended("wait", name, None, f"waiting for signal {name!r}"))
            params = WaitParams(fence=self._job.fence, name=name, timeout=limit)
            reached = self._fenced(self._tx(lambda tx: backend.reach_wait(tx, params)))
            record = self._keep(reached.record, reached.now)
        if record.resolution == "signal":
            return record.result
        if record.resolution == "timeout":
            raise TimeoutError(f"no signal {name!r} came for job {self._job.id} before its deadline "
                               f"{record.wake_at.isoformat() if record.wake_at else ''}")
        until = f"until {record.wake_at.isoformat()}" if record.wake_at is not None else "(no timeout)"
        raise self._suspend(Suspended("wait", name, record.wake_at, f"waiting for signal {name!r} {until}"))

    async def wait_for_async(self, name: str, timeout: timedelta | float | None = None) -> Any:
        """:meth:`wait_for` from an ``async def`` handler (its database work in a thread)."""
        return await asyncio.to_thread(self.wait_for, name, timeout)


def _check_name(name: object) -> str:
    if not isinstance(name, str) or not name.strip():
        raise InvalidOption(f"a step, sleep or wait name must be a non-empty string, got {name!r:.80}")
    if len(name) > NAME_LIMIT or "\x00" in name:
        raise InvalidOption(f"a step, sleep or wait name must be at most {NAME_LIMIT} characters without NUL, "
                            f"got {name!r:.80}")
    return name


def wake_check(ctx: DurableSteps, params: FinishParams | None) -> Callable[[Tx], None] | None:
    """For a run suspended in a wait: ``call(tx)`` for its outcome transaction, after the fenced write.

    ``tx`` is the outcome transaction's handle of the run's store (a
    ``Session`` for PostgreSQL).  The call wakes the job at once if the
    signal is stored already, else leaves it invisible until the deadline
    (``DurableBackend.wake_wait``); it commits or rolls back with the
    outcome, and a crash before that commit leaves the claim to expire.
    None for any other run, and for a run without a store.
    """
    suspended = ctx.suspension
    if suspended is None or suspended.what != "wait" or params is None or params.outcome is not Outcome.PAUSED:
        return None
    checkpointer = ctx.checkpointer
    backend = checkpointer.backend if checkpointer is not None else None
    if backend is None:
        return None  # no store (testing.perform): nothing was recorded, nothing to wake
    wake = WakeWaitParams(fence=params.fence, name=suspended.name, deadline=suspended.until)

    def call(tx: Tx) -> None:
        backend.wake_wait(tx, wake)

    return call
