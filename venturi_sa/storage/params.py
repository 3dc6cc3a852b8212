"""Frozen, keyword-only parameter objects for the storage verbs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection
from sqlalchemy.orm import Session

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

    @property
    def fence(self) -> Fence:
        return Fence(job_id=self.id, kind=self.kind, claimed_by=self.claimed_by, run_count=self.run_count)


@dataclass(frozen=True, kw_only=True)
class ClaimParams:
    worker_id: str
    kinds: Sequence[str]
    limit: int
    leases: Mapping[str, timedelta]
    default_lease: timedelta


@dataclass(frozen=True, kw_only=True)
class FinishParams:
    """One run's outcome: the new row state and its journal entry.

    ``status`` is the job's status afterwards; ``visible_at`` (absolute) or
    ``delay`` (from the database clock) applies to ``pending``; ``failure``
    adds one to ``failure_count``.
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


@dataclass(frozen=True, kw_only=True)
class RenewParams:
    worker_id: str
    runs: Sequence[tuple[str, int]]  # (job id, run_count)
    lease: timedelta


@dataclass(frozen=True, kw_only=True)
class RecoverParams:
    """Recover expired leases: ``max_failures`` per kind, ``default_max_failures`` else."""

    limit: int = 100
    max_failures: Mapping[str, int] = field(default_factory=dict)
    default_max_failures: int = 5


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
    """Which held runs were renewed, and which had lost their claim."""

    renewed: frozenset[Fence] = frozenset()
    lost: frozenset[Fence] = frozenset()


@dataclass(frozen=True, kw_only=True)
class SoonestParams:
    kinds: Sequence[str]
