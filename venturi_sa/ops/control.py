"""Runtime control: cancel jobs, pause and resume kinds, edit pending jobs, retry one now.

Each function runs in one short transaction on an ``Engine`` (committed on
return, rolled back on any error, so a refused or failed action changes
nothing), except :func:`cancel` given a ``Session``: it then joins the
caller's transaction and never commits, so an enqueue and its cancel can
commit (or roll back) together.  Per-job actions append one journal row
naming the actor and the note; pauses are recorded in ``<prefix>_pauses``,
whose rows a resume closes but never deletes.  A crash before commit leaves
everything as it was.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session

from venturi_sa import payloads
from venturi_sa.dead_calls import make_owed_calls
from venturi_sa.errors import InvalidOption, InvalidTransition, UnknownKind
from venturi_sa.models import Models
from venturi_sa.ops.history import job_not_found
from venturi_sa.ops.records import JobInfo, jsonable
from venturi_sa.ops.transaction import short_transaction
from venturi_sa.states import Status
from venturi_sa.storage import archive as archived
from venturi_sa.storage.backend import backend_for
from venturi_sa.storage.control import PATTERN_MARK, CancelParams, EditParams, PauseParams, ResumeParams
from venturi_sa.storage.history import JobParams
from venturi_sa.storage.params import NOTE_LIMIT, Runner
from venturi_sa.task import KIND_PATTERN, Registry, Task, check_delay, check_priority, check_run_at

DEFAULT_ACTOR = "operator"


def check_text(value: object, what: str, *, required: bool = False) -> str | None:
    """A note, reason or actor as stored: a string without NUL of at most ``NOTE_LIMIT`` characters."""
    if value is None:
        if required:
            raise InvalidOption(f"{what} is required")
        return None
    if not isinstance(value, str):
        raise InvalidOption(f"{what} must be a string, got {type(value).__name__}")
    if "\x00" in value or len(value) > NOTE_LIMIT or (required and not value.strip()):
        raise InvalidOption(f"{what} must be non-empty text without NUL, at most {NOTE_LIMIT} characters")
    return value


# -- cancel ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Cancelled:
    """What a cancel did: ``"cancelled"`` (a pending job is ``dead`` now) or ``"requested"`` (a claimed
    job's worker ends the run as cancelled-dead once its next lease renewal reads the request)."""

    job_id: str
    kind: str
    status: str  # the job's status after the cancel
    result: str

    def as_dict(self) -> dict[str, Any]:
        return {"job_id": self.job_id, "kind": self.kind, "status": self.status, "result": self.result}


def cancel_in(models: Models, runner: Runner, job_id: str, note: str | None, actor: str,
              registry: Registry | None = None) -> Cancelled:
    """Cancel one job in ``runner``'s transaction (see :func:`cancel`)."""
    params = CancelParams(job_id=job_id, actor=check_text(actor, "actor", required=True) or actor,
                                  note=check_text(note, "note"))
    result = backend_for(models).cancel(runner, params)
    if result.job is None:
        status = archived.archived_status(models, runner, job_id)
        if status is not None:
            raise InvalidTransition(f"cannot cancel job {job_id}: it is already {status} (archived)")
        raise job_not_found(models, job_id)
    if result.done:
        if registry is not None and isinstance(runner, Session):
            make_owed_calls(runner, models, registry, job_ids=[job_id])
        return Cancelled(job_id, result.job.kind, Status.DEAD.value, "cancelled")
    if result.requested:
        return Cancelled(job_id, result.job.kind, Status.CLAIMED.value, "requested")
    raise InvalidTransition(f"cannot cancel job {job_id}: it is already {result.job.status}")


def cancel(models: Models, bind: sa.Engine | Session, job_id: str, note: str | None = None,
           actor: str = DEFAULT_ACTOR, registry: Registry | None = None) -> Cancelled:
    """Cancel a job: a pending one ends ``dead`` now; a claimed one gets a durable cancel request.

    The holding worker delivers the request at its next lease renewal (at
    once through ``NOTIFY`` when it listens): ``ctx.cancelled`` turns true
    and an ``async def`` handler's task is cancelled.  When the handler
    returns (a sync one must check ``ctx.cancelled`` to stop early), the run
    ends ``dead`` with a "cancelled by" note and its ``ctx.session`` work
    rolled back.  If the run
    finishes first, its own outcome stands (exactly one outcome is written);
    if it ends retried, paused or released, or its worker dies, before the
    request reaches it, the job ends ``dead`` as cancelled all the same.
    A job that ends ``dead`` gets its task's ``on_dead`` once: here, in this
    transaction, when ``registry`` has its kind (the queue's own calls pass
    it), else in the next worker of that kind.  Given a ``Session``, runs in
    its transaction and never commits.  Raises ``JobNotFound``, or
    ``InvalidTransition`` for a job already completed or dead.
    """
    if isinstance(bind, Session):
        return cancel_in(models, bind, job_id, note, actor, registry)
    with short_transaction(models, bind) as session:
        return cancel_in(models, session, job_id, note, actor, registry)


def cancel_kind(models: Models, engine: sa.Engine, kind: str, note: str | None = None,
                actor: str = DEFAULT_ACTOR, limit: int = 10_000, registry: Registry | None = None) -> list[Cancelled]:
    """Cancel every pending or claimed job of ``kind`` (up to ``limit``), in one transaction."""
    check_text(kind, "kind", required=True)
    with short_transaction(models, engine) as session:
        ids = backend_for(models).cancel_candidates(session, kind, limit)
        done = []
        for job_id in ids:
            try:
                done.append(cancel_in(models, session, job_id, note, actor, registry))
            except InvalidTransition:
                continue  # finished meanwhile
        return done


# -- pause and resume ---------------------------------------------------------------------------------
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
        row = backend_for(models).pause_kind(session, params)
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
        backend = backend_for(models)
        row = backend.resume_kind(session, params)
        if row is None:
            held = backend.pause_of(session, kind)
            hint = f": it is held by the pause of {held.kind!r}, resume that" if held is not None else ""
            raise InvalidTransition(f"kind {kind!r} is not paused in queue {models.prefix!r}{hint}")
        return PauseInfo.of(row)


def pauses(models: Models, engine: sa.Engine, *, in_force_only: bool = True) -> list[PauseInfo]:
    """The pauses in force (or, with ``in_force_only=False``, the recent record), newest first."""
    with short_transaction(models, engine) as session:
        return [PauseInfo.of(r) for r in backend_for(models).pauses(session, in_force_only)]


# -- edits of pending jobs -------------------------------------------------------------------------------
def _stored_payload(registry: Registry, kind: str, payload: Any, max_bytes: int) -> Any:
    if kind not in registry:
        raise UnknownKind(f"cannot edit the payload of a {kind!r} job: its task type is not registered in "
                          "this queue, so the new payload cannot be validated")
    task_type = registry.get(kind)
    what = f"payload of {kind!r}"
    task = task_type.from_stored(payloads.ensure_json(payload, what, max_bytes))
    if task_type.stored_payload is Task.stored_payload:
        return payloads.dump(task_type.payload_schema, task.payload, what, max_bytes)
    return payloads.ensure_json(task.stored_payload(), what, max_bytes)


def edit(models: Models, registry: Registry, engine: sa.Engine, job_id: str, *, priority: int | None = None,
         run_at: datetime | None = None, delay: timedelta | None = None, run_now: bool = False,
         payload: Any = None, note: str | None = None, actor: str = DEFAULT_ACTOR,
         max_payload_bytes: int = payloads.DEFAULT_MAX_PAYLOAD_BYTES) -> JobInfo:
    """Change a pending job's priority, when it runs, or its payload (validated by its task's schema).

    One transaction: the row is locked, checked to be ``pending`` and changed,
    and one journal row lists the changes.  Raises ``InvalidTransition`` for
    a claimed or terminal job (nothing written), ``JobNotFound``,
    ``InvalidPayload``/``InvalidOption`` for bad values (checked as enqueue
    checks them: a payload over ``max_payload_bytes``, a ``delay`` or
    ``run_at`` out of range; docs/tasks.md lists the bounds).
    """
    if (run_at is not None) + (delay is not None) + bool(run_now) > 1:
        raise InvalidOption("give one of run_at=, delay= and run_now=True")
    check_run_at(run_at)
    check_delay(delay)
    tier = int(check_priority(priority)) if priority is not None else None
    changes = []
    if tier is not None:
        changes.append(f"priority -> {tier}")
    if run_now:
        changes.append("run now")
    if run_at is not None:
        changes.append(f"run at {run_at.isoformat()}")
    if delay is not None:
        changes.append(f"run in {delay.total_seconds():g}s")
    if payload is not None:
        changes.append("payload replaced")
    if not changes:
        raise InvalidOption("nothing to edit: give priority, run_at, delay, run_now or payload")
    with short_transaction(models, engine) as session:
        backend = backend_for(models)
        found = backend.job_row(session, JobParams(job_id=job_id))
        if found is None:
            status = archived.archived_status(models, session, job_id)
            if status is not None:
                raise InvalidTransition(f"cannot edit job {job_id}: it is {status} (archived), and only pending "
                                        "jobs can be edited")
            raise job_not_found(models, job_id)
        stored = _stored_payload(registry, found.kind, payload, max_payload_bytes) if payload is not None else None
        params = EditParams(job_id=job_id, actor=check_text(actor, "actor", required=True) or actor,
                                    note=check_text(note, "note"), priority=tier, visible_at=run_at, delay=delay,
                                    visible_now=run_now, payload=stored, set_payload=payload is not None,
                                    changes=tuple(changes))
        result = backend.edit_pending(session, params)
        if result.job is None:
            raise job_not_found(models, job_id)
        if not result.applied:
            raise InvalidTransition(f"cannot edit job {job_id}: it is {result.job.status}, and only pending "
                                    "jobs can be edited (cancel a claimed job, requeue a dead one)")
        return JobInfo(**result.job._mapping)


def retry_now(models: Models, engine: sa.Engine, job_id: str, note: str | None = None,
              actor: str = DEFAULT_ACTOR) -> JobInfo:
    """Make a pending job (in backoff, or scheduled) eligible now; journaled.  ``InvalidTransition`` otherwise."""
    return edit(models, Registry(()), engine, job_id, run_now=True, note=note, actor=actor)
