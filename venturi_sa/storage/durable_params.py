"""The records and frozen, keyword-only params of the durable-step verbs (:mod:`~venturi_sa.storage.durable_backend`).

Plain values, no SQL: :class:`StepInfo` (one recorded step, sleep or wait,
also what ``queue.steps`` returns), :class:`ParentInfo` (one parent of a
dependent, also what ``queue.parents`` returns) and one params object per
verb.  Both stores return these, so the worker never sees a database row.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from venturi_sa.storage.params import Fence


@dataclass(frozen=True)
class StepInfo:
    """One recorded step, sleep or wait of a job (``entry``), with its timing.

    ``result``: a step's recorded result, or the payload of the signal that
    resolved a wait; ``wake_at``: a sleep's wake time or a wait's deadline
    (None: no timeout); ``resolution``: ``"signal"`` / ``"timeout"`` for a
    resolved wait, None while it is open; ``run_no``: the run that first
    reached it.
    """

    name: str
    entry: str
    result: Any
    run_no: int
    started_at: datetime
    finished_at: datetime | None
    wake_at: datetime | None
    resolution: str | None

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "entry": self.entry, "result": self.result, "run_no": self.run_no,
                "started_at": self.started_at.isoformat(),
                "finished_at": self.finished_at.isoformat() if self.finished_at else None,
                "wake_at": self.wake_at.isoformat() if self.wake_at else None, "resolution": self.resolution}


@dataclass(frozen=True)
class ParentInfo:
    """One parent of a job: ``result`` is what ``queue.result`` gives (None unless completed); ``note`` its
    last journal note."""

    id: str
    kind: str | None
    status: str | None
    result: Any
    note: str | None


@dataclass(frozen=True)
class StepsRead:
    """Every recorded entry of a job by name, and the store's clock when they were read."""

    records: dict[str, StepInfo]
    now: datetime


@dataclass(frozen=True)
class Reached:
    """A sleep or wait as recorded once reached: its record and the store's clock at that moment."""

    record: StepInfo
    now: datetime


@dataclass(frozen=True, kw_only=True)
class StepsParams:
    """Read the recorded entries of ``job_id``."""

    job_id: str


@dataclass(frozen=True, kw_only=True)
class RecordStepParams:
    """Record step ``name`` of ``fence``'s run: its JSON ``result``, started ``elapsed`` seconds ago."""

    fence: Fence
    name: str
    result: Any
    elapsed: float = 0.0


@dataclass(frozen=True, kw_only=True)
class SleepParams:
    """Reach sleep ``name`` of ``fence``'s run: wake at now + ``delay``, or at ``until``."""

    fence: Fence
    name: str
    delay: timedelta | None = None
    until: datetime | None = None


@dataclass(frozen=True, kw_only=True)
class WaitParams:
    """Reach wait ``name`` of ``fence``'s run: deadline now + ``timeout`` (None: no deadline)."""

    fence: Fence
    name: str
    timeout: timedelta | None = None


@dataclass(frozen=True, kw_only=True)
class WakeWaitParams:
    """After ``fence``'s run suspended in wait ``name`` was written ``paused``: wake it, or hold it to
    ``deadline`` (None: for good, until its signal)."""

    fence: Fence
    name: str
    deadline: datetime | None = None


@dataclass(frozen=True, kw_only=True)
class ParentsParams:
    """The parents of ``job_id`` at positions ``offset`` to ``offset + limit - 1`` (the ``after=`` order)."""

    job_id: str
    offset: int = 0
    limit: int | None = None
