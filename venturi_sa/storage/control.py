"""Runtime control: paused kinds, cancel requests, edits of pending jobs, and the facts ``explain`` reads.

Every verb runs in the caller's transaction and never commits.  A row a verb
changes is locked first (``SELECT … FOR UPDATE``), its status checked, and
the change written with the expected status repeated in the ``WHERE``
clause together with its journal row (``storage.admin.guarded_write``,
shared with the admin actions), so a worker's fenced outcome write and an
operator action on the same job serialize: exactly one of them wins.
Per-job actions append one journal row naming the actor; pauses are their
own durable record in ``<prefix>_pauses`` (a resume closes the row, it
never deletes it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from venturi_sa.models import Models
from venturi_sa.states import Outcome, Status
from venturi_sa.storage import drivers
from venturi_sa.storage.admin import guarded_write, lock_statement
from venturi_sa.storage.history import job_columns
from venturi_sa.storage.params import Runner

ALL_KINDS = "*"
"""The pause ``kind`` that pauses every kind of the queue (the kind pattern with an empty prefix)."""
PATTERN_MARK = "*"
"""A pause ``kind`` ending in this is a pattern: it pauses every kind starting with what precedes it."""
CANCEL_PAYLOAD = "venturi:cancel"
"""The ``NOTIFY`` payload that asks listening workers to renew (and so read cancel requests) now."""


# -- pauses -------------------------------------------------------------------------------------
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


def claimable_kinds(models: Models, kinds: Sequence[str]) -> Any:
    """The claim's paused-kind filter: ``kind = ANY(ARRAY(those of kinds not paused))``.

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
    blocked = sa.exists().where(_in_force(models), _covers(models, listed.c.k))
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


def _moment(value: datetime) -> sa.ColumnElement[datetime]:
    """``value`` bound as ``timestamptz`` (compared with ``now()``, an untyped bind is sent as ``timestamp``,
    which asyncpg refuses for an aware datetime)."""
    return sa.literal(value, sa.DateTime(timezone=True))


def pause(models: Models, runner: Runner, params: PauseParams) -> sa.Row[Any] | None:
    """Record a pause in force from now; a pause already open for the kind is closed first (superseded).

    Returns None, writing nothing, if ``until`` is not after the database clock's now.
    """
    if params.until is not None and runner.execute(sa.select(sa.func.now() >= _moment(params.until))).scalar_one():
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


# -- cancel ---------------------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class CancelParams:
    job_id: str
    actor: str
    note: str | None = None


@dataclass(frozen=True, kw_only=True)
class CancelResult:
    """``job`` as found (None: no such job); ``done``: a pending job ended ``dead`` now;
    ``requested``: a claimed job's run got a cancel request (or already had one)."""

    job: sa.Row[Any] | None
    done: bool = False
    requested: bool = False


def cancel_note(actor: str, note: str | None, running: bool = False) -> str:
    head = f"cancelled by {actor}" + (" while running" if running else "")
    return f"{head}: {note}" if note else head


def cancel(models: Models, runner: Runner, params: CancelParams) -> CancelResult:
    """Lock the job; a pending one ends ``dead`` now (journaled), a claimed one gets a durable cancel request.

    A claimed job whose lease has expired (its worker is gone) ends ``dead``
    now too: a late outcome of that worker finds its fence broken.

    The request (the first one wins; later ones change nothing) is read by
    the holding worker's next lease renewal; a ``NOTIFY`` sent on commit
    asks listening workers to renew at once.  A terminal job is left as it is.
    """
    current = runner.execute(lock_statement(models, params.job_id)).first()
    if current is None:
        return CancelResult(job=None)
    if current.status == Status.PENDING.value:
        return CancelResult(job=_end_now(models, runner, params, Status.PENDING) or current, done=True)
    if current.status != Status.CLAIMED.value:
        return CancelResult(job=current)
    if runner.execute(sa.select(sa.func.now() > _moment(current.claim_expires_at))).scalar_one():
        # Its worker is gone (the lease expired unrenewed): end it now; a late write is fenced out.
        return CancelResult(job=_end_now(models, runner, params, Status.CLAIMED, "lease expired") or current,
                            done=True)
    runner.execute(
        postgresql.insert(models.CancelRequest)
        .values(job_id=current.id, run_no=current.run_count, actor=params.actor, note=params.note,
                created_at=sa.func.now())
        .on_conflict_do_nothing(index_elements=["job_id"])
    )
    runner.execute(drivers.notify_statement(models.names.channel, CANCEL_PAYLOAD))
    return CancelResult(job=current, requested=True)


def _end_now(models: Models, runner: Runner, params: CancelParams, status: Status,
             why: str | None = None) -> sa.Row[Any] | None:
    """``status`` -> ``dead`` now, journaled ``dead`` with the cancel note; None if the status guard failed."""
    note = cancel_note(params.actor, params.note)
    values = {"status": Status.DEAD.value, "finished_at": sa.func.clock_timestamp(), "claimed_by": None,
              "claim_expires_at": None}
    return guarded_write(models, runner, params.job_id, status, values, Outcome.DEAD,
                         f"{note} ({why})" if why else note, params.actor)


def clear_cancel(models: Models, runner: Runner, job_id: str) -> None:
    """Forget a job's cancel request (a requeued job starts afresh)."""
    request = models.CancelRequest
    runner.execute(sa.delete(request).where(request.job_id == job_id).execution_options(synchronize_session=False))


def cancel_request(models: Models, runner: Runner, job_id: str) -> sa.Row[Any] | None:
    request = models.CancelRequest
    columns: list[Any] = [request.run_no, request.actor, request.note, request.created_at]
    return runner.execute(sa.select(*columns).where(request.job_id == job_id)).first()


def non_terminal_ids(models: Models, runner: Runner, *, kind: str, limit: int) -> list[str]:
    """Ids of up to ``limit`` pending or claimed jobs of ``kind``, oldest first (for a cancel by filter)."""
    job = models.Job
    return list(runner.execute(
        sa.select(job.id).where(job.kind == kind, job.status.in_([Status.PENDING.value, Status.CLAIMED.value]))
        .order_by(job.created_at, job.id).limit(limit)).scalars())


# -- edits of pending jobs --------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class EditParams:
    """New values for one pending job (None: unchanged); ``visible_now`` makes it eligible at once."""

    job_id: str
    actor: str
    note: str | None = None
    priority: int | None = None
    visible_at: datetime | None = None
    delay: timedelta | None = None
    visible_now: bool = False
    payload: Any = None
    set_payload: bool = False
    changes: tuple[str, ...] = field(default=())


@dataclass(frozen=True, kw_only=True)
class EditResult:
    job: sa.Row[Any] | None
    applied: bool = False


def edit(models: Models, runner: Runner, params: EditParams) -> EditResult:
    """Lock the job; if it is pending, write the new values and one journal row describing them."""
    current = runner.execute(lock_statement(models, params.job_id)).first()
    if current is None or current.status != Status.PENDING.value:
        return EditResult(job=current)
    values: dict[str, Any] = {}
    if params.priority is not None:
        values["priority"] = params.priority
    if params.visible_now:
        values["visible_at"] = sa.func.clock_timestamp()
    elif params.delay is not None:
        values["visible_at"] = sa.func.now() + sa.literal(params.delay, sa.Interval)
    elif params.visible_at is not None:
        values["visible_at"] = params.visible_at
    if params.set_payload:
        values["payload"] = sa.cast(sa.literal(params.payload, postgresql.JSONB), postgresql.JSONB)
    what = "; ".join(params.changes) or "no change"
    note = f"edited by {params.actor}: {what}" + (f" ({params.note})" if params.note else "")
    row = guarded_write(models, runner, params.job_id, Status.PENDING, values, Outcome.RELEASED, note)
    if row is None:
        return EditResult(job=current)
    if params.visible_now or params.delay is not None or params.visible_at is not None:
        runner.execute(drivers.notify_statement(models.names.channel, row.kind))
    return EditResult(job=row, applied=True)


# -- explain ---------------------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class ExplainFacts:
    """What the database says about one job, for ``explain``; ``job`` is None if there is none."""

    job: sa.Row[Any] | None
    now: datetime | None = None
    last_entry: sa.Row[Any] | None = None
    pause: sa.Row[Any] | None = None
    cancel: sa.Row[Any] | None = None
    ahead: int = 0
    ahead_capped: bool = False
    recent_activity: bool = True


def explain_facts(models: Models, runner: Runner, job_id: str, *, activity_window: timedelta,
                  ahead_limit: int = 10_000) -> ExplainFacts:
    """Read the job, its last journal entry, its kind's pause, its cancel request and its place in line."""
    job = models.Job
    row = runner.execute(sa.select(*job_columns(models)).where(job.id == job_id)).first()
    if row is None:
        return ExplainFacts(job=None)
    entry = models.JournalEntry
    last = runner.execute(sa.select(entry.outcome, entry.note, entry.recorded_at, entry.run_no)
                          .where(entry.job_id == job_id).order_by(entry.id.desc()).limit(1)).first()
    now = runner.execute(sa.select(sa.func.now())).scalar_one()
    facts: dict[str, Any] = {"job": row, "now": now, "last_entry": last,
                             "cancel": cancel_request(models, runner, job_id)}
    if row.status == Status.PENDING.value:
        facts["pause"] = pause_of(models, runner, row.kind)
        facts["ahead"] = _ahead(models, runner, row, ahead_limit)
        facts["ahead_capped"] = facts["ahead"] >= ahead_limit
        facts["recent_activity"] = _recent_activity(models, runner, row.kind, activity_window)
    return ExplainFacts(**facts)


def _ahead(models: Models, runner: Runner, row: sa.Row[Any], limit: int) -> int:
    """Eligible pending jobs of the same kind that a claim takes before this one (counted up to ``limit``)."""
    job = models.Job
    first = sa.or_(job.priority < row.priority,
                   sa.and_(job.priority == row.priority, sa.tuple_(job.created_at, job.id)
                           < sa.tuple_(sa.literal(row.created_at), sa.literal(row.id))))
    ahead = (sa.select(job.id).where(job.status == Status.PENDING.value, job.kind == row.kind,
                                     job.visible_at <= sa.func.now(), first).limit(limit).subquery())
    return int(runner.execute(sa.select(sa.func.count()).select_from(ahead)).scalar_one())


def _recent_activity(models: Models, runner: Runner, kind: str, window: timedelta) -> bool:
    """Whether a worker ran this kind lately: a job of it claimed now, or finished within ``window``."""
    job = models.Job
    since = sa.func.now() - sa.literal(window, sa.Interval)
    claimed = sa.exists().where(job.status == Status.CLAIMED.value, job.kind == kind)
    finished = sa.exists().where(job.status.in_([Status.COMPLETED.value, Status.DEAD.value]), job.kind == kind,
                                 job.finished_at > since, job.run_count > 0)
    return bool(runner.execute(sa.select(sa.or_(claimed, finished))).scalar_one())
