"""An in-memory :class:`~venturi_sa.storage.backend.Backend`: the worker's verbs without PostgreSQL.

For tests only, never production: nothing is durable, nothing is shared
between processes, and only the worker's verbs exist (enqueue, operations,
schedules and the dashboard are PostgreSQL's).  It keeps the SQL
backend's semantics, and ``tests/integration/conformance`` holds both to the same tests:

* claim order is (priority, ``created_at``, id); a claim takes pending,
  visible, unpaused jobs of its kinds, at most ``limit`` and at most
  ``caps[kind]`` of a capped kind, sets ``claimed_by``, ``run_count + 1`` and
  the kind's lease;
* every write is fenced: ``finish_many`` and ``checkpoint`` change a job only
  while it is ``claimed`` by the fence's worker and run;
* ``finish_many`` and ``recover`` write journal rows, owe ``on_dead`` calls
  and honour stored cancel requests as the SQL does;
* :meth:`MemoryBackend.locked` stands for another transaction's row lock:
  claim, renew and recover skip a locked job (``SKIP LOCKED``).

Transactions: the backend is its own ``Transactions``.  ``begin(fn)`` runs
``fn(tx)`` holding one lock (transactions are serial); every change goes
through an undo log, so a raising ``fn`` leaves nothing behind (rollback),
and returning keeps everything (commit).  Time is ``clock()`` (UTC now by
default; tests pass their own to move it without sleeping).

Tests put jobs in with :meth:`MemoryBackend.add` and read them back from
:attr:`~MemoryBackend.jobs`, :attr:`~MemoryBackend.journal` and
:attr:`~MemoryBackend.owed`.
"""

from __future__ import annotations

import dataclasses
import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, TypeVar

from venturi_sa.models import new_job_id
from venturi_sa.states import OUTCOME_STATUS, Outcome, Status
from venturi_sa.storage.memory_steps import MemorySteps
from venturi_sa.storage.params import (
    CheckpointParams,
    ClaimedJob,
    ClaimParams,
    Fence,
    FinishManyParams,
    PingParams,
    RecoveredJob,
    RecoverParams,
    RenewParams,
    RenewResult,
    SoonestParams,
)

T = TypeVar("T")
PATTERN_MARK = "*"  # as storage.pauses: a pause kind ending in it holds every kind starting with the rest


def _now() -> datetime:
    return datetime.now(timezone.utc)


def _json(value: Any) -> Any:
    """``value`` as JSONB would give it back (tuples as lists, keys as strings)."""
    return None if value is None else json.loads(json.dumps(value))


@dataclass
class MemoryJob:
    """One job row (the columns the worker's verbs read and write)."""

    id: str
    kind: str
    payload: Any = None
    carry: Any = None
    priority: int = 1
    status: str = Status.PENDING.value
    created_at: datetime = field(default_factory=_now)
    visible_at: datetime = field(default_factory=_now)
    claimed_by: str | None = None
    claim_expires_at: datetime | None = None
    finished_at: datetime | None = None
    run_count: int = 0
    failure_count: int = 0
    timeout: timedelta | None = None  # an enqueue's own time limit


@dataclass(frozen=True)
class JournalRow:
    job_id: str
    kind: str
    run_no: int
    outcome: str
    note: str | None
    attachment: Any
    recorded_at: datetime


@dataclass(frozen=True)
class OwedCall:
    """An owed ``on_dead`` call (``<prefix>_on_dead``)."""

    job_id: str
    kind: str
    run_no: int
    note: str | None
    actor: str
    created_at: datetime


@dataclass(frozen=True)
class CancelRequest:
    actor: str
    note: str | None


@dataclass(frozen=True)
class Pause:
    kind: str  # a kind, or a pattern ending in ``*``
    resume_at: datetime | None = None


class MemoryTx:
    """One open transaction of a :class:`MemoryBackend`: its undo log."""

    def __init__(self, store: MemoryBackend) -> None:
        self.store = store
        self._undo: list[Callable[[], None]] = []
        self._saved: set[str] = set()

    def job(self, job_id: str) -> MemoryJob:
        """The job, its current values saved for a rollback before the caller changes it."""
        job = self.store.jobs[job_id]
        if job_id not in self._saved:
            self._saved.add(job_id)
            before = dataclasses.replace(job)
            self._undo.append(lambda: self.store.jobs.__setitem__(job_id, before))
        return job

    def append(self, rows: list[Any], row: Any) -> None:
        rows.append(row)
        self._undo.append(rows.pop)

    def drop_cancel(self, job_id: str) -> None:
        request = self.store.cancels.pop(job_id, None)
        if request is not None:
            self._undo.append(lambda: self.store.cancels.__setitem__(job_id, request))

    def undo_with(self, undo: Callable[[], None]) -> None:
        """Call ``undo`` on rollback (after the later changes' undos)."""
        self._undo.append(undo)

    def rollback(self) -> None:
        for undo in reversed(self._undo):
            undo()
        self._undo.clear()


class MemoryBackend(MemorySteps):
    """The worker's verbs over Python dicts and lists (tests only; see the module docstring).

    Its durable-step verbs (steps, sleeps, waits and signals, parents) are
    :class:`~venturi_sa.storage.memory_steps.MemorySteps`'.
    """

    def __init__(self, prefix: str = "memory", clock: Callable[[], datetime] = _now) -> None:
        super().__init__()
        self.prefix = prefix
        self.clock = clock
        self.jobs: dict[str, MemoryJob] = {}
        self.journal: list[JournalRow] = []
        self.owed: list[OwedCall] = []
        self.cancels: dict[str, CancelRequest] = {}
        self.pauses: list[Pause] = []
        self.row_locks: set[str] = set()
        self._lock = threading.RLock()

    # -- what tests use --------------------------------------------------------------------
    def add(self, kind: str = "noop", payload: Any = None, **columns: Any) -> str:
        """Put one job in (committed at once); ``columns`` are :class:`MemoryJob` fields.  Returns its id."""
        with self._lock:
            job = MemoryJob(id=columns.pop("id", None) or new_job_id(), kind=kind,
                            payload=_json(payload if payload is not None else {}), **columns)
            self.jobs[job.id] = job
            return job.id

    def journal_of(self, job_id: str) -> list[tuple[int, str]]:
        """``(run_no, outcome)`` of a job's journal rows, oldest first."""
        return [(r.run_no, r.outcome) for r in self.journal if r.job_id == job_id]

    def request_cancel(self, job_id: str, actor: str, note: str | None = None) -> None:
        """Store a cancel request for a claimed job, as ``Queue.cancel`` does."""
        with self._lock:
            self.cancels[job_id] = CancelRequest(actor=actor, note=note)

    def pause(self, kind: str, resume_at: datetime | None = None) -> None:
        """Pause a kind (or a pattern ending in ``*``) until :meth:`resume` or ``resume_at``."""
        with self._lock:
            self.pauses.append(Pause(kind=kind, resume_at=resume_at))

    def resume(self, kind: str) -> None:
        with self._lock:
            self.pauses = [p for p in self.pauses if p.kind != kind]

    @contextmanager
    def locked(self, job_id: str) -> Iterator[None]:
        """While open, ``job_id`` is row-locked by someone else: claim, renew and recover skip it."""
        self.row_locks.add(job_id)
        try:
            yield
        finally:
            self.row_locks.discard(job_id)

    # -- Transactions -------------------------------------------------------------------------
    def begin(self, fn: Callable[[MemoryTx], T]) -> T:
        """``fn(tx)`` under the store's lock: kept if it returns, undone if it raises."""
        with self._lock:
            tx = MemoryTx(self)
            try:
                return fn(tx)
            except BaseException:
                tx.rollback()
                raise

    connect = begin

    # -- the worker's verbs -------------------------------------------------------------------
    def _paused(self, kind: str, now: datetime) -> bool:
        return any((p.resume_at is None or p.resume_at > now)
                   and (p.kind == kind or (p.kind.endswith(PATTERN_MARK) and kind.startswith(p.kind[:-1])))
                   for p in self.pauses)

    def claim(self, tx: MemoryTx, params: ClaimParams) -> list[ClaimedJob]:
        if params.limit <= 0 or not params.kinds:
            return []
        now = self.clock()
        open_kinds = {k for k in params.kinds if not self._paused(k, now)}
        eligible = sorted((j for j in self.jobs.values()
                           if j.status == Status.PENDING.value and j.kind in open_kinds and j.visible_at <= now
                           and j.id not in self.row_locks),
                          key=lambda j: (j.priority, j.created_at, j.id))
        room = {k: max(0, min(c, params.limit)) for k, c in params.caps.items() if k in open_kinds}
        uncapped_left = params.limit
        candidates: list[MemoryJob] = []
        for job in eligible:  # each group's own best (as each CTE's LIMIT), then the best of all groups
            if job.kind in room:
                if room[job.kind] > 0:
                    room[job.kind] -= 1
                    candidates.append(job)
            elif uncapped_left > 0:
                uncapped_left -= 1
                candidates.append(job)
        claimed = []
        for picked in candidates[:params.limit]:
            job = tx.job(picked.id)
            job.status, job.claimed_by, job.run_count = Status.CLAIMED.value, params.worker_id, job.run_count + 1
            job.claim_expires_at = now + params.leases.get(job.kind, params.default_lease)
            claimed.append(ClaimedJob(id=job.id, kind=job.kind, payload=_json(job.payload), carry=_json(job.carry),
                                      priority=job.priority, created_at=job.created_at, run_count=job.run_count,
                                      failure_count=job.failure_count, claimed_by=params.worker_id,
                                      waited=(now - job.visible_at).total_seconds(), timeout=job.timeout))
        return claimed

    def _holds(self, fence: Fence) -> MemoryJob | None:
        job = self.jobs.get(fence.job_id)
        if (job is None or job.status != Status.CLAIMED.value or job.claimed_by != fence.claimed_by
                or job.run_count != fence.run_count):
            return None
        return job

    def finish_many(self, tx: MemoryTx, params: FinishManyParams) -> dict[Fence, Outcome]:
        now = self.clock()
        written: dict[Fence, Outcome] = {}
        for p in params.outcomes:
            if self._holds(p.fence) is None:
                continue
            job = tx.job(p.fence.job_id)
            status, outcome, note = OUTCOME_STATUS[p.outcome], p.outcome, p.note
            stored = self.cancels.get(job.id)
            request = _undelivered_cancel(stored, sends_back=status is Status.PENDING)
            if request is not None:
                status, outcome = Status.DEAD, Outcome.DEAD
                note = _cancel_text(request, "before the cancel reached its run, the run ended")
            job.status, job.claimed_by, job.claim_expires_at = status.value, None, None
            if status.terminal:
                job.finished_at = now
            if status is Status.PENDING:
                job.visible_at = p.visible_at if p.visible_at is not None else now + (p.delay or timedelta(0))
            job.failure_count += 1 if p.failure else 0
            if p.save_carry:
                job.carry = _json(p.carry)
            if request is not None or p.owe_on_dead:
                actor = stored.actor if stored is not None else p.fence.claimed_by
                tx.append(self.owed, OwedCall(job_id=job.id, kind=job.kind, run_no=job.run_count, note=note,
                                              actor=actor, created_at=now))
            tx.append(self.journal, JournalRow(job_id=job.id, kind=job.kind, run_no=job.run_count,
                                               outcome=outcome.value, note=note, attachment=_json(p.attachment),
                                               recorded_at=now))
            if status is not Status.PENDING:
                tx.drop_cancel(job.id)
            written[p.fence] = outcome
        return written

    def renew(self, tx: MemoryTx, params: RenewParams) -> RenewResult:
        now = self.clock()
        renewed, lost, cancels = set(), set(), {}
        for fence in params.runs:
            job = self.jobs.get(fence.job_id)
            if (job is None or job.status != Status.CLAIMED.value or job.claimed_by != params.worker_id
                    or job.run_count != fence.run_count):
                lost.add(fence)
                continue
            request = self.cancels.get(fence.job_id)
            if request is not None:
                head = f"cancelled by {request.actor} while running"
                cancels[fence] = f"{head}: {request.note}" if request.note else head
            if fence.job_id not in self.row_locks:
                tx.job(fence.job_id).claim_expires_at = now + params.lease
                renewed.add(fence)
        return RenewResult(renewed=frozenset(renewed), lost=frozenset(lost), cancels=cancels)

    def recover(self, tx: MemoryTx, params: RecoverParams) -> list[RecoveredJob]:
        if not params.max_failures:
            return []
        now = self.clock()
        stale = sorted((j for j in self.jobs.values()
                        if j.status == Status.CLAIMED.value and j.claim_expires_at is not None
                        and j.claim_expires_at < now and j.kind in params.max_failures
                        and j.id not in self.row_locks),
                       key=lambda j: j.claim_expires_at or now)[:params.limit]
        recovered = []
        for found in stale:
            job = tx.job(found.id)
            was, request = job.claimed_by, _undelivered_cancel(self.cancels.get(job.id), sends_back=True)
            dead = job.failure_count + 1 >= params.max_failures[job.kind] or request is not None
            job.failure_count += 1
            job.status = Status.DEAD.value if dead else Status.PENDING.value
            job.finished_at = now if dead else None
            job.visible_at = job.visible_at if dead else now
            job.claimed_by, job.claim_expires_at = None, None
            lease = f"lease of {was or '?'} expired" + ("; dead at max_failures" if dead else "; back to pending")
            note = (_cancel_text(request, f"before the cancel was delivered, the lease of {was or '?'} expired")
                    if request is not None else lease)
            outcome = Outcome.DEAD if request is not None else Outcome.STALE_RECOVERED
            tx.append(self.journal, JournalRow(job_id=job.id, kind=job.kind, run_no=job.run_count,
                                               outcome=outcome.value, note=note, attachment=None, recorded_at=now))
            if dead:
                actor = request.actor if request is not None else (was or "venturi")
                tx.append(self.owed, OwedCall(job_id=job.id, kind=job.kind, run_no=job.run_count, note=note,
                                              actor=actor, created_at=now))
                tx.drop_cancel(job.id)
            recovered.append(RecoveredJob(id=job.id, kind=job.kind, run_count=job.run_count, dead=dead,
                                          claimed_by=was, outcome=outcome))
        return recovered

    def soonest_visible(self, tx: MemoryTx, params: SoonestParams) -> float | None:
        now = self.clock()
        future = [j.visible_at for j in self.jobs.values()
                  if j.status == Status.PENDING.value and j.kind in params.kinds and j.visible_at > now]
        return max(0.0, (min(future) - now).total_seconds()) if future else None

    def checkpoint(self, tx: MemoryTx, params: CheckpointParams) -> bool:
        if self._holds(params.fence) is None:
            return False
        tx.job(params.fence.job_id).carry = _json(params.carry)
        return True

    def ping(self, tx: MemoryTx, params: PingParams) -> None:
        """Always reachable."""


def _undelivered_cancel(request: CancelRequest | None, sends_back: bool) -> CancelRequest | None:
    """As ``storage.outcomes.undelivered_cancel``: the stored request that turns an ending that ``sends_back``
    to ``pending`` into a cancelled ``dead`` (every recovery sends back), or None."""
    return request if sends_back else None


def _cancel_text(request: CancelRequest, why: str) -> str:
    """As ``storage.outcomes.cancel_text``: ``cancelled by <actor> (<why>)[: <note>]``."""
    text = f"cancelled by {request.actor} ({why})"
    return f"{text}: {request.note}" if request.note is not None else text
