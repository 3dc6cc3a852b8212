"""Frozen, keyword-only parameter objects for the storage verbs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import cached_property
from typing import Any

from sqlalchemy import Connection
from sqlalchemy.orm import Session

from venturi_sa import payloads
from venturi_sa.errors import InvalidPayload, VenturiError
from venturi_sa.states import Outcome

Runner = Session | Connection
"""Where a storage verb runs: an ORM Session or a Core Connection, inside the caller's transaction."""


@dataclass(frozen=True, kw_only=True)
class Fence:
    """Identifies one run of one job: the claim the outcome write is guarded on."""

    job_id: str
    kind: str
    claimed_by: str
    run_count: int


@dataclass(frozen=True, kw_only=True)
class ClaimedJob:
    """A claimed row, as plain data safe to hand to another thread."""

    id: str
    kind: str
    payload: Any
    carry: Any
    priority: int
    created_at: datetime
    run_count: int
    failure_count: int
    claimed_by: str
    waited: float = 0.0  # seconds from visible_at to this claim, on the database clock
    next_visible: float | None = None  # seconds until the soonest future visible_at of the claim's kinds
    timeout: timedelta | None = None  # the job's own time limit (an enqueue's timeout=), overriding Task.timeout

    @cached_property
    def fence(self) -> Fence:
        """The claim this run's writes are guarded on (built once: it keys the worker's runs)."""
        return Fence(job_id=self.id, kind=self.kind, claimed_by=self.claimed_by, run_count=self.run_count)


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
    if value is None:
        return
    try:
        payloads.ensure_json(value, name)
    except InvalidPayload as exc:
        raise InvalidOutcome(str(exc)) from None


@dataclass(frozen=True, kw_only=True)
class FinishParams:
    """One run's outcome: the new row state and its journal entry.

    ``status`` is the job's status afterwards; ``visible_at`` (absolute) or
    ``delay`` (from the database clock) applies to ``pending``; ``failure``
    adds one to ``failure_count``.  Every field is checked when the object
    is built (raising :class:`InvalidOutcome`), so a bad value can never
    reach a batch statement and sink the outcomes written beside it.
    """

    fence: Fence
    outcome: Outcome
    note: str | None = None
    attachment: Any = None
    carry: Any = None
    save_carry: bool = False
    visible_at: datetime | None = None
    delay: timedelta | None = None
    failure: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.fence, Fence):
            raise InvalidOutcome(f"fence must be a Fence, got {self.fence!r:.80}")
        if not isinstance(self.outcome, Outcome):
            raise InvalidOutcome(f"outcome must be an Outcome, got {self.outcome!r:.80}")
        _check_text("note", self.note)
        _check_json("attachment", self.attachment)
        if self.save_carry:
            _check_json("carry", self.carry)
        if self.visible_at is not None and (
            not isinstance(self.visible_at, datetime) or self.visible_at.utcoffset() is None
        ):
            raise InvalidOutcome(f"visible_at must be a timezone-aware datetime, got {self.visible_at!r:.80}")
        if self.delay is not None and (not isinstance(self.delay, timedelta) or self.delay < timedelta(0)):
            raise InvalidOutcome(f"delay must be a non-negative timedelta, got {self.delay!r:.80}")
        if not isinstance(self.failure, bool) or not isinstance(self.save_carry, bool):
            raise InvalidOutcome("failure and save_carry must be booleans")


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
    id: str
    kind: str
    run_count: int
    dead: bool
    claimed_by: str | None


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
