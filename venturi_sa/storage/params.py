"""Frozen, keyword-only parameter objects for the storage verbs."""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, NamedTuple

from sqlalchemy import Connection
from sqlalchemy.orm import Session

from venturi_sa import payloads
from venturi_sa.declarations.limit_rules import KindLimits
from venturi_sa.errors import InvalidPayload, VenturiError
from venturi_sa.states import Outcome

Runner = Session | Connection
"""Where a storage verb runs: an ORM Session or a Core Connection, inside the caller's transaction."""


class Fence(NamedTuple):
    """Identifies one run of one job: the claim the outcome write is guarded on.

    A named tuple (immutable, hashed and compared in C): it keys the
    worker's runs and is built once per claimed job.
    """

    job_id: str
    kind: str
    claimed_by: str
    run_count: int


@dataclass(init=False, slots=True)
class ClaimedJob:
    """A claimed row, as plain data safe to hand to another thread.

    Read-only by contract (nothing assigns its attributes after the claim).
    A slotted dataclass with its own ``__init__`` rather than a frozen one:
    one is built per claimed job, and a frozen dataclass's ``__init__`` (one
    ``object.__setattr__`` per field) was a measurable share of the worker's
    per-job time.  Equality and repr are the dataclass's; unhashable, as its
    payload is a dict.
    """

    id: str
    kind: str
    payload: Any
    carry: Any
    priority: int
    created_at: datetime
    run_count: int
    failure_count: int
    claimed_by: str
    waited: float  # seconds from visible_at to this claim, on the database clock
    timeout: timedelta | None  # the job's own time limit (an enqueue's timeout=), overriding Task.timeout
    fence: Fence = field(repr=False)  # the claim this run's writes are guarded on (it keys the worker's runs)

    def __init__(self, *, id: str, kind: str, payload: Any, carry: Any, priority: int,  # noqa: A002
                 created_at: datetime, run_count: int, failure_count: int, claimed_by: str,
                 waited: float = 0.0, timeout: timedelta | None = None) -> None:
        self.id = id
        self.kind = kind
        self.payload = payload
        self.carry = carry
        self.priority = priority
        self.created_at = created_at
        self.run_count = run_count
        self.failure_count = failure_count
        self.claimed_by = claimed_by
        self.waited = waited
        self.timeout = timeout
        self.fence = Fence(id, kind, claimed_by, run_count)


@dataclass(frozen=True, kw_only=True)
class ClaimParams:
    """Claim up to ``limit`` jobs of ``kinds``, at most ``caps[kind]`` of each capped kind.

    Kinds in ``caps`` are claimed in the same statement as the others, so
    priority and age order the whole claim; a kind whose room is 0 is
    left out.
    """

    worker_id: str
    kinds: Sequence[str]
    limit: int
    leases: Mapping[str, timedelta]
    default_lease: timedelta
    caps: Mapping[str, int] = field(default_factory=dict)
    throttles: Mapping[str, timedelta] = field(default_factory=dict)  # Task.throttle by kind (storage/throttled_claim)
    limits: Mapping[str, KindLimits] = field(default_factory=dict)  # declared limits (storage/limited_claim.py)
    skip_overridden: bool = False  # leave out kinds with a runtime limit override (storage/limited_claim.py)
    probe: tuple[str, ...] = ()  # kinds (not claimed here) the claim also looks for work of (storage/limited_claim.py)


ZERO = timedelta(0)
"""A zero delay (shared by the outcome checks and the outcome batch)."""
NOTE_LIMIT = 2000
"""The longest journal note (characters); builders truncate, :class:`FinishParams` refuses longer."""


class InvalidOutcome(VenturiError, ValueError):
    """An outcome value that cannot be written (wrong type, naive time, not JSON, NUL, too long)."""


def _check_text(name: str, value: object) -> None:
    if value is None:
        return
    if not isinstance(value, str):
        raise InvalidOutcome(f"{name} must be a string, got {type(value).__name__} {value!r:.80}")
    if "\x00" in value:
        raise InvalidOutcome(f"{name} contains a NUL character, which PostgreSQL text cannot store")
    if len(value) > NOTE_LIMIT:
        raise InvalidOutcome(f"{name} is {len(value)} characters long; the limit is {NOTE_LIMIT}")


def _check_json(name: str, value: object) -> None:
    """JSON can store ``value`` exactly (its size was bounded by who built it: the queue's ``max_payload_bytes``)."""
    if value is None:
        return
    try:
        payloads.ensure_json(value, name, sys.maxsize)
    except InvalidPayload as exc:
        raise InvalidOutcome(str(exc)) from None


@dataclass(init=False, slots=True)
class FinishParams:
    """One run's outcome: the new row state and its journal entry.

    ``status`` is the job's status afterwards; ``visible_at`` (absolute) or
    ``delay`` (from the database clock) applies to ``pending``; ``failure``
    adds one to ``failure_count``; ``owe_on_dead`` (a ``dead`` outcome whose
    ``on_dead`` could not run with it) writes an owed call beside it.  Every field is checked when the object
    is built (raising :class:`InvalidOutcome`), so a bad value can never
    reach a batch statement and sink the outcomes written beside it.
    Read-only by contract; a slotted dataclass with its own checking
    ``__init__`` (one is built per run) rather than a frozen one.
    """

    fence: Fence
    outcome: Outcome
    note: str | None
    attachment: Any
    carry: Any
    save_carry: bool
    visible_at: datetime | None
    delay: timedelta | None
    failure: bool
    owe_on_dead: bool

    def __init__(self, *, fence: Fence, outcome: Outcome, note: str | None = None, attachment: Any = None,
                 carry: Any = None, save_carry: bool = False, visible_at: datetime | None = None,
                 delay: timedelta | None = None, failure: bool = False, owe_on_dead: bool = False) -> None:
        if not isinstance(fence, Fence):
            raise InvalidOutcome(f"fence must be a Fence, got {fence!r:.80}")
        if not isinstance(outcome, Outcome):
            raise InvalidOutcome(f"outcome must be an Outcome, got {outcome!r:.80}")
        if note is not None:
            _check_text("note", note)
        if attachment is not None:
            _check_json("attachment", attachment)
        if save_carry and carry is not None:
            _check_json("carry", carry)
        if visible_at is not None and (not isinstance(visible_at, datetime) or visible_at.utcoffset() is None):
            raise InvalidOutcome(f"visible_at must be a timezone-aware datetime, got {visible_at!r:.80}")
        if delay is not None and (not isinstance(delay, timedelta) or delay < ZERO):
            raise InvalidOutcome(f"delay must be a non-negative timedelta, got {delay!r:.80}")
        if (failure is not True and failure is not False) or (save_carry is not True and save_carry is not False) or (
                owe_on_dead is not False and (owe_on_dead is not True or outcome is not Outcome.DEAD)):
            raise InvalidOutcome("failure, save_carry and owe_on_dead must be booleans; owe_on_dead needs a dead "
                                 f"outcome, not {outcome.value}")
        self.fence = fence
        self.outcome = outcome
        self.note = note
        self.attachment = attachment
        self.carry = carry
        self.save_carry = save_carry
        self.visible_at = visible_at
        self.delay = delay
        self.failure = failure
        self.owe_on_dead = owe_on_dead


@dataclass(frozen=True, kw_only=True)
class RenewParams:
    """Push the leases of ``runs`` (this worker's claims) to now + ``lease``."""

    worker_id: str
    runs: Sequence[Fence]
    lease: timedelta


@dataclass(frozen=True, kw_only=True)
class RecoverParams:
    """Recover expired leases of the kinds in ``max_failures`` (kind -> its backstop).

    Only kinds whose policy the caller knows are recovered: a job of
    another kind is left to a worker whose registry has it, so no job is
    ever judged by a backstop that is not its own.
    """

    max_failures: Mapping[str, int]
    limit: int = 100


@dataclass(frozen=True, kw_only=True)
class RecoveredJob:
    """A claim recovery ended: ``outcome`` is what its journal row records (``stale-recovered``, or ``dead``
    for a cancel request it applied); ``dead`` whether the job is ``dead`` now (a cancel, or the backstop)."""

    id: str
    kind: str
    run_count: int
    dead: bool
    claimed_by: str | None
    outcome: Outcome


@dataclass(frozen=True, kw_only=True)
class FinishManyParams:
    """A batch of outcomes to write in one statement (each validated when it was built)."""

    outcomes: Sequence[FinishParams]


@dataclass(frozen=True, kw_only=True)
class RenewResult:
    """Which held runs were renewed, which had lost their claim, and which an operator cancelled.

    ``cancels`` maps each still-held run with a cancel request to the note
    its cancelled-dead outcome records.
    """

    renewed: frozenset[Fence] = frozenset()
    lost: frozenset[Fence] = frozenset()
    cancels: Mapping[Fence, str] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class SoonestParams:
    kinds: Sequence[str]


@dataclass(frozen=True, kw_only=True)
class CheckpointParams:
    """Store ``carry`` (JSON, already dumped through the task's schema) on the run named by ``fence``."""

    fence: Fence
    carry: Any


@dataclass(frozen=True, kw_only=True)
class PingParams:
    """A liveness probe of the store (no fields: one round trip, nothing read or written)."""


PING = PingParams()
