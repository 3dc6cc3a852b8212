"""Paused kinds: the claim's filter, pause and resume, and the record in ``<prefix>_pauses``.

Every verb runs in the caller's transaction and never commits.  A pause is
its own durable row (a resume closes the row, it never deletes it); it
holds from every worker's next claim after commit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from venturi_sa.models import Models
from venturi_sa.storage import drivers
from venturi_sa.storage.params import Runner
from venturi_sa.storage.timestamps import moment

ALL_KINDS = "*"
"""The pause ``kind`` that pauses every kind of the queue (the kind pattern with an empty prefix)."""
PATTERN_MARK = "*"
"""A pause ``kind`` ending in this is a pattern: it pauses every kind starting with what precedes it."""


def _in_force(models: Models) -> Any:
    pause = models.Pause
    return sa.and_(pause.resumed_at.is_(None),
                   sa.or_(pause.resume_at.is_(None), pause.resume_at > sa.func.now()))


def _covers(models: Models, kind: Any) -> Any:
    """Whether a pause row holds ``kind``: it names that kind, or it is a pattern ``kind`` starts with.

    A pattern is the pause ``kind`` minus its trailing ``*`` (``'*'`` itself
    is the empty prefix: every kind).  ``starts_with`` compares the prefix
    literally, so the ``_`` that kinds often contain is no wildcard (as it
    would be in ``LIKE``) and nothing needs escaping.
    """
    pause = models.Pause
    pattern = sa.and_(sa.func.right(pause.kind, 1) == PATTERN_MARK,
                      sa.func.starts_with(kind, sa.func.left(pause.kind, -1)))
    return sa.or_(pause.kind == kind, pattern)


def claimable_kinds(models: Models, kinds: Sequence[str], *, skip_overridden: bool = False) -> Any:
    """The claim's paused-kind filter: ``kind = ANY(ARRAY(those of kinds not paused))``.

    With ``skip_overridden`` (the worker's claim of kinds it takes as
    unlimited) a kind with a runtime limit override is left out too, in the
    same InitPlan: a limit set at runtime holds from every worker's next
    claim, and the worker moves the kind to its limited claim when it next
    reads the overrides (:mod:`venturi_sa.storage.limited_claim`).

    The array is an uncorrelated InitPlan over the few open pause rows (a
    pause of the kind itself, or of a pattern it starts with; ``'*'``
    empties it), run once per statement, so a pause holds from every
    worker's next claim.  Beside the claim's own constant kind list it
    leaves the index scan and the planner's row estimate as they were (a
    ``NOT IN (paused)`` filter would halve the estimate and tilt small tables
    to a sort).  The claim's kinds are one ``unnest`` of an array parameter,
    not a ``UNION`` of one-row selects: cheaper to plan on every claim.
    """
    wanted = sa.func.unnest(sa.literal(list(kinds), postgresql.ARRAY(sa.Text))).table_valued("k")
    listed = wanted.render_derived(name="wanted")
    blocked: Any = sa.exists().where(_in_force(models), _covers(models, listed.c.k))
    if skip_overridden:  # a runtime limit set since the worker last looked: its limited claim takes the kind
        override: Any = models.Limits.Override
        blocked = sa.or_(blocked, sa.exists().where(override.kind == listed.c.k))
    allowed = sa.select(listed.c.k).where(~blocked)
    return models.Job.kind == sa.any_(sa.func.ARRAY(allowed.scalar_subquery()))


@dataclass(frozen=True, kw_only=True)
class PauseParams:
    """Pause ``kind`` until resumed or until ``until`` (absolute) / ``delay``.

    ``kind`` is a kind, or a pattern ending in ``*``: ``'reports.*'`` holds
    every kind starting with ``reports.``, ``'*'`` every kind.
    """

    kind: str
    actor: str
    reason: str | None = None
    until: datetime | None = None
    delay: timedelta | None = None


@dataclass(frozen=True, kw_only=True)
class ResumeParams:
    kind: str
    actor: str


_PAUSE_COLUMNS = ("id", "kind", "reason", "actor", "paused_at", "resume_at", "resumed_at", "resumed_by")


def _pause_columns(models: Models) -> list[Any]:
    return [getattr(models.Pause, c) for c in _PAUSE_COLUMNS]


def _close_open(models: Models, runner: Runner, kind: str, actor: str) -> sa.Row[Any] | None:
    """Close the kind's open pause row (one past its ``resume_at`` closes at that time); the row, or None."""
    pause = models.Pause
    now = sa.func.now()
    return runner.execute(
        sa.update(pause).where(pause.kind == kind, pause.resumed_at.is_(None))
        .values(resumed_at=sa.case((pause.resume_at < now, pause.resume_at), else_=now), resumed_by=actor)
        .returning(*_pause_columns(models))
        .execution_options(synchronize_session=False)
    ).first()


def pause(models: Models, runner: Runner, params: PauseParams) -> sa.Row[Any] | None:
    """Record a pause in force from now; a pause already open for the kind is closed first (superseded).

    Returns None, writing nothing, if ``until`` is not after the database clock's now.
    """
    if params.until is not None and runner.execute(sa.select(sa.func.now() >= moment(params.until))).scalar_one():
        return None
    _close_open(models, runner, params.kind, params.actor)
    pause = models.Pause
    resume_at: Any = params.until
    if params.delay is not None:
        resume_at = sa.func.now() + sa.literal(params.delay, sa.Interval)
    return runner.execute(
        sa.insert(pause).values(kind=params.kind, reason=params.reason, actor=params.actor,
                                paused_at=sa.func.now(), resume_at=resume_at)
        .returning(*_pause_columns(models))
    ).one()


def resume(models: Models, runner: Runner, params: ResumeParams) -> sa.Row[Any] | None:
    """Close the kind's open pause and wake the queue's workers (on commit); None if none was open."""
    row = _close_open(models, runner, params.kind, params.actor)
    if row is not None:
        runner.execute(drivers.notify_statement(models.names.channel))
    return row


def pauses(models: Models, runner: Runner, *, in_force_only: bool = True, limit: int = 100) -> list[sa.Row[Any]]:
    """Pause rows newest first: those in force, or (``in_force_only=False``) the whole record."""
    pause = models.Pause
    stmt = sa.select(*_pause_columns(models), _in_force(models).label("in_force"))
    if in_force_only:
        stmt = stmt.where(_in_force(models))
    rows: list[sa.Row[Any]] = [*runner.execute(stmt.order_by(pause.id.desc()).limit(limit))]
    return rows


def pause_of(models: Models, runner: Runner, kind: str) -> sa.Row[Any] | None:
    """The pause in force that holds ``kind``: its own, else the longest pattern it starts with (``'*'`` last)."""
    pause = models.Pause
    return runner.execute(
        sa.select(*_pause_columns(models)).where(_in_force(models), _covers(models, sa.literal(kind, sa.Text)))
        .order_by((pause.kind == kind).desc(), sa.func.length(pause.kind).desc()).limit(1)
    ).first()
