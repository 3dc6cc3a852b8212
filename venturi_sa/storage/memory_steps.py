"""The durable-step verbs in memory: :class:`MemorySteps`, mixed into :class:`~venturi_sa.storage.memory.MemoryBackend`.

For tests only, like the rest of the memory backend: nothing is durable or
shared between processes.  It keeps the SQL's contract
(``tests/integration/conformance/test_durable_verbs.py`` runs both):

* a write (a step's record, a sleep's wake time, a wait's deadline) happens
  only while the fence's run holds its claim (``claimed``, same worker and
  run), else nothing is written and the verb returns None; a name is
  recorded once (a second record of it returns the first);
* a wait is resolved ``signal`` by a signal of its name sent before its
  deadline, ``timeout`` at or past the deadline, and stays resolved;
* :meth:`MemorySteps.wake_wait`, after a suspended wait's ``paused`` write,
  makes the job visible now if its signal is stored, else at the deadline
  (never, without one);
* parents are read in ``after=`` order, with the result and note of each
  parent's journal (``queue.result``'s rule).

Changes go through the transaction's undo log (a raising ``fn`` of
``begin`` leaves nothing; returning keeps everything).  Time is the store's
``clock()``.  Tests send signals with :meth:`MemorySteps.signal` and link a
dependent to its parents with :meth:`MemorySteps.link`, both committed at once.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from datetime import datetime, timedelta, timezone
from typing import Any, Protocol

from venturi_sa.states import Outcome, Status
from venturi_sa.storage.durable_params import (
    ParentInfo,
    ParentsParams,
    Reached,
    RecordStepParams,
    SleepParams,
    StepInfo,
    StepsParams,
    StepsRead,
    WaitParams,
    WakeWaitParams,
)
from venturi_sa.storage.params import Fence
from venturi_sa.storage.signals import SignalResult

NEVER = datetime.max.replace(tzinfo=timezone.utc)
"""``visible_at`` of a job waiting for a signal without a deadline (PostgreSQL's ``'infinity'``)."""


class _Job(Protocol):
    kind: str
    status: str
    claimed_by: str | None
    run_count: int
    visible_at: datetime


class _JournalRow(Protocol):
    @property
    def job_id(self) -> str: ...

    @property
    def outcome(self) -> str: ...

    @property
    def note(self) -> str | None: ...

    @property
    def attachment(self) -> Any: ...


class _Tx(Protocol):
    def job(self, job_id: str) -> _Job: ...

    def undo_with(self, undo: Callable[[], None]) -> None: ...


@dataclass(frozen=True)
class MemorySignal:
    """One signal sent to a job (``<prefix>_signals``)."""

    payload: Any
    sent_at: datetime


def _json(value: Any) -> Any:
    """``value`` as JSONB would give it back."""
    return None if value is None else json.loads(json.dumps(value))


class MemorySteps:
    """The :class:`~venturi_sa.storage.durable_backend.DurableBackend` verbs over dicts (see the module)."""

    jobs: Mapping[str, _Job]
    journal: Sequence[_JournalRow]
    clock: Callable[[], datetime]
    _lock: AbstractContextManager[Any]  # the store's lock (MemoryBackend's)

    def __init__(self) -> None:
        self.steps: dict[str, dict[str, StepInfo]] = {}  # job id -> name -> record, in the order first reached
        self.signals: dict[str, dict[str, MemorySignal]] = {}  # job id -> name -> signal
        self.links: dict[str, list[str]] = {}  # a dependent's parents, in after= order

    # -- what tests use --------------------------------------------------------------------
    def link(self, job_id: str, parents: Sequence[str]) -> None:
        """Make ``parents`` the parents of ``job_id`` (``after=``), in that order (committed at once)."""
        with self._lock:
            self.links[job_id] = list(parents)

    def signal(self, job_id: str, name: str, payload: Any = None) -> SignalResult:
        """Send a signal as ``queue.signal`` does (committed at once), without its caps; what happened."""
        with self._lock:
            job = self.jobs.get(job_id)
            if job is None:
                return SignalResult.NOT_FOUND
            if Status(job.status).terminal:
                return SignalResult.TERMINAL
            sent = self.signals.setdefault(job_id, {})
            stored = _json(payload)
            if name in sent:
                same = json.dumps(sent[name].payload, sort_keys=True) == json.dumps(stored, sort_keys=True)
                return SignalResult.DUPLICATE if same else SignalResult.CONFLICT
            now = self.clock()
            wait = self.steps.get(job_id, {}).get(name)
            if wait is not None and wait.entry == "wait" and (wait.resolution == "timeout" or (
                    wait.resolution is None and wait.wake_at is not None and wait.wake_at <= now)):
                return SignalResult.TIMED_OUT
            sent[name] = MemorySignal(payload=stored, sent_at=now)
            if job.status != Status.PENDING.value or wait is None or wait.entry != "wait" or wait.resolution:
                return SignalResult.STORED
            job.visible_at = now
            return SignalResult.WOKE

    # -- the verbs ----------------------------------------------------------------------------
    def _fence_holds(self, fence: Fence) -> bool:
        job = self.jobs.get(fence.job_id)
        return (job is not None and job.status == Status.CLAIMED.value and job.claimed_by == fence.claimed_by
                and job.run_count == fence.run_count)

    def _put(self, tx: _Tx, job_id: str, record: StepInfo) -> StepInfo:
        records = self.steps.setdefault(job_id, {})
        before = records.get(record.name)
        records[record.name] = record

        def undo() -> None:
            if before is None:
                del records[record.name]
            else:
                records[record.name] = before

        tx.undo_with(undo)
        return record

    def read_steps(self, tx: _Tx, params: StepsParams) -> StepsRead:
        return StepsRead(records=dict(self.steps.get(params.job_id, {})), now=self.clock())

    def record_step(self, tx: _Tx, params: RecordStepParams) -> StepInfo | None:
        if not self._fence_holds(params.fence):
            return None
        fence, now = params.fence, self.clock()
        recorded = self.steps.get(fence.job_id, {}).get(params.name)
        if recorded is not None:
            return recorded
        started = now - timedelta(seconds=max(params.elapsed, 0.0))
        return self._put(tx, fence.job_id, StepInfo(params.name, "step", _json(params.result), fence.run_count,
                                                    started, now, None, None))

    def reach_sleep(self, tx: _Tx, params: SleepParams) -> Reached | None:
        if not self._fence_holds(params.fence):
            return None
        fence, now = params.fence, self.clock()
        record = self.steps.get(fence.job_id, {}).get(params.name)
        if record is None:
            wake = params.until if params.until is not None else now + (params.delay or timedelta(0))
            record = self._put(tx, fence.job_id, StepInfo(params.name, "sleep", None, fence.run_count, now, None,
                                                          wake, None))
        return Reached(record=record, now=now)

    def reach_wait(self, tx: _Tx, params: WaitParams) -> Reached | None:
        if not self._fence_holds(params.fence):
            return None
        fence, now = params.fence, self.clock()
        record = self.steps.get(fence.job_id, {}).get(params.name)
        if record is None:
            deadline = None if params.timeout is None else now + params.timeout
            record = self._put(tx, fence.job_id, StepInfo(params.name, "wait", None, fence.run_count, now, None,
                                                          deadline, None))
        if record.entry == "wait" and record.resolution is None:
            sent = self.signals.get(fence.job_id, {}).get(params.name)
            if sent is not None and (record.wake_at is None or sent.sent_at < record.wake_at):
                record = self._put(tx, fence.job_id, replace(record, resolution="signal", result=sent.payload,
                                                             finished_at=now))
            elif record.wake_at is not None and record.wake_at <= now:
                record = self._put(tx, fence.job_id, replace(record, resolution="timeout", finished_at=now))
        return Reached(record=record, now=now)

    def wake_wait(self, tx: _Tx, params: WakeWaitParams) -> None:
        fence = params.fence
        job = self.jobs.get(fence.job_id)
        if job is None or job.status != Status.PENDING.value or job.run_count != fence.run_count:
            return
        stored = params.name in self.signals.get(fence.job_id, {})
        tx.job(fence.job_id).visible_at = self.clock() if stored else (params.deadline or NEVER)

    def read_parents(self, tx: _Tx, params: ParentsParams) -> list[ParentInfo]:
        links = self.links.get(params.job_id, [])
        shown = links[params.offset:] if params.limit is None else links[params.offset:params.offset + params.limit]
        return [self._parent(parent_id) for parent_id in shown]

    def _parent(self, parent_id: str) -> ParentInfo:
        job = self.jobs.get(parent_id)
        if job is None:
            return ParentInfo(id=parent_id, kind=None, status=None, result=None, note=None)
        rows = [r for r in self.journal if r.job_id == parent_id]
        completed = [r for r in rows if r.outcome == Outcome.COMPLETED.value]
        return ParentInfo(id=parent_id, kind=job.kind, status=job.status,
                          result=completed[-1].attachment if completed else None,
                          note=rows[-1].note if rows else None)
