"""Pause and resume kinds (or kind patterns), and list the pauses.

Each function runs in one short transaction on an ``Engine`` (committed on
return, rolled back on any error, so a refused or failed action changes
nothing).  Pauses are recorded in ``<prefix>_pauses``, whose rows a resume
closes but never deletes.  A crash before commit leaves everything as it was.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa

from venturi_sa.declarations.time_checks import check_delay, check_run_at
from venturi_sa.errors import InvalidOption, InvalidTransition
from venturi_sa.models import Models
from venturi_sa.ops.checks import DEFAULT_ACTOR, check_text
from venturi_sa.ops.records import jsonable
from venturi_sa.ops.transaction import short_transaction
from venturi_sa.storage import pauses as pauses_store
from venturi_sa.storage.pauses import PATTERN_MARK, PauseParams, ResumeParams
from venturi_sa.task import KIND_PATTERN


def check_pause_kind(kind: object) -> str:
    """A kind, or a kind pattern: a prefix and one trailing ``*`` (``"reports.*"``; ``"*"`` alone: every kind)."""
    text = check_text(kind, "kind", required=True) or ""
    stem = text.removesuffix(PATTERN_MARK)
    if PATTERN_MARK in stem:
        raise InvalidOption(f"kind pattern {text!r}: '*' may only end it ('reports.*' pauses every kind starting "
                            "with 'reports.', '*' alone the whole queue)")
    if stem and not KIND_PATTERN.fullmatch(stem):
        raise InvalidOption(f"{text!r} is neither a kind nor a kind pattern: a kind is 1-200 letters, digits and "
                            "_.:-/, a pattern a kind's first characters and a trailing '*'")
    return text


@dataclass(frozen=True)
class PauseInfo:
    """One pause of a kind (``"*"``: the whole queue): who, why, since when, until when."""

    kind: str
    reason: str | None
    actor: str
    paused_at: datetime
    resume_at: datetime | None
    resumed_at: datetime | None
    resumed_by: str | None

    @classmethod
    def of(cls, row: sa.Row[Any]) -> PauseInfo:
        return cls(kind=row.kind, reason=row.reason, actor=row.actor, paused_at=row.paused_at,
                   resume_at=row.resume_at, resumed_at=row.resumed_at, resumed_by=row.resumed_by)

    def as_dict(self) -> dict[str, Any]:
        return {k: jsonable(v) for k, v in self.__dict__.items()}


def pause(models: Models, engine: sa.Engine, kind: str, *, reason: str | None = None,
          until: datetime | None = None, delay: timedelta | None = None, actor: str = DEFAULT_ACTOR) -> PauseInfo:
    """Pause ``kind``: from commit on, no worker's claim takes its jobs.

    ``kind`` may be a pattern ending in ``*``: ``"reports.*"`` pauses every
    kind starting with ``reports.`` (kinds added later too), ``"*"`` every
    kind; a kind's own pause and the patterns it matches each hold it.
    Anything else with a ``*`` raises ``InvalidOption``.  Runs in flight
    finish.  ``until`` (an aware time) or ``delay`` ends the pause by
    itself.  Persisted, so it survives worker restarts; pausing a paused
    kind (or pattern) replaces its pause (the old row is closed, not lost).
    """
    check_pause_kind(kind)
    if until is not None and delay is not None:
        raise InvalidOption("pause takes until= or delay=, not both")
    check_run_at(until, "until", past=False)
    check_delay(delay, positive=True)
    params = PauseParams(kind=kind, actor=check_text(actor, "actor", required=True) or actor,
                                 reason=check_text(reason, "reason"), until=until, delay=delay)
    with short_transaction(models, engine) as session:
        row = pauses_store.pause(models, session, params)
        if row is None:
            raise InvalidOption(f"until {until.isoformat() if until else until} is not in the future")
        return PauseInfo.of(row)


def resume(models: Models, engine: sa.Engine, kind: str, actor: str = DEFAULT_ACTOR) -> PauseInfo:
    """End ``kind``'s pause now (its row records who resumed it) and wake the workers on commit.

    A pattern's pause is ended by the same pattern.  Raises
    ``InvalidTransition`` if ``kind`` has no pause of its own (naming the
    pattern that holds it, if one does).
    """
    check_pause_kind(kind)
    params = ResumeParams(kind=kind, actor=check_text(actor, "actor", required=True) or actor)
    with short_transaction(models, engine) as session:
        row = pauses_store.resume(models, session, params)
        if row is None:
            held = pauses_store.pause_of(models, session, kind)
            hint = f": it is held by the pause of {held.kind!r}, resume that" if held is not None else ""
            raise InvalidTransition(f"kind {kind!r} is not paused in queue {models.prefix!r}{hint}")
        return PauseInfo.of(row)


def pauses(models: Models, engine: sa.Engine, *, in_force_only: bool = True) -> list[PauseInfo]:
    """The pauses in force (or, with ``in_force_only=False``, the recent record), newest first."""
    with short_transaction(models, engine) as session:
        return [PauseInfo.of(r) for r in pauses_store.pauses(models, session, in_force_only=in_force_only)]
