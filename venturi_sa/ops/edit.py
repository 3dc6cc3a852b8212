"""Edit pending jobs (priority, when they run, payload), and retry one now.

Each function runs in one short transaction on an ``Engine`` (committed on
return, rolled back on any error, so a refused or failed edit changes
nothing) and appends one journal row naming the actor and the changes.  A
crash before commit leaves everything as it was.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa

from venturi_sa import limit_keying, payloads
from venturi_sa.declarations.time_checks import check_delay, check_run_at
from venturi_sa.errors import InvalidOption, InvalidTransition, UnknownKind
from venturi_sa.models import Models
from venturi_sa.ops import dependents as workflow
from venturi_sa.ops.checks import DEFAULT_ACTOR, check_text
from venturi_sa.ops.history import job_not_found
from venturi_sa.ops.records import JobInfo
from venturi_sa.ops.transaction import short_transaction
from venturi_sa.storage import archive_reads
from venturi_sa.storage import edits as edits_store
from venturi_sa.storage import history as history_store
from venturi_sa.storage import steps as step_store
from venturi_sa.storage.edits import EditParams
from venturi_sa.storage.history import JobParams
from venturi_sa.task import Registry, Task, check_priority


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
    ``run_at`` out of range; docs/tasks.md lists the bounds).  A new payload
    on which the task's own ``limit_key()`` raises is ``InvalidPayload``
    naming the error, checked before anything is written.
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
        found = history_store.fetch_job(models, session, JobParams(job_id=job_id))
        if found is None:
            status = archive_reads.archived_status(models, session, job_id)
            if status is not None:
                raise InvalidTransition(f"cannot edit job {job_id}: it is {status} (archived), and only pending "
                                        "jobs can be edited")
            raise job_not_found(models, job_id)
        if run_now or run_at is not None or delay is not None:
            workflow.refuse_waiting(models, session, job_id, "retry now" if changes == ["run now"] else "reschedule")
        if payload is not None and step_store.has_any(models, session, job_id):
            raise InvalidTransition(f"cannot edit the payload of job {job_id}: it has recorded steps, sleeps or "
                                    "waits, which a new payload would not match (requeue with reset_steps instead)")
        stored = _stored_payload(registry, found.kind, payload, max_payload_bytes) if payload is not None else None
        key = limit_keying.edited_key(registry.get(found.kind), stored) if stored is not None else None
        params = EditParams(job_id=job_id, actor=check_text(actor, "actor", required=True) or actor,
                                    note=check_text(note, "note"), priority=tier, visible_at=run_at, delay=delay,
                                    visible_now=run_now, payload=stored, set_payload=payload is not None,
                                    changes=tuple(changes))
        result = edits_store.edit(models, session, params)
        if result.job is None:
            raise job_not_found(models, job_id)
        if not result.applied:
            raise InvalidTransition(f"cannot edit job {job_id}: it is {result.job.status}, and only pending "
                                    "jobs can be edited (cancel a claimed job, requeue a dead one)")
        if stored is not None:
            limit_keying.store_edited(models, session, registry.get(found.kind), job_id, key)
        return JobInfo(**result.job._mapping)


def retry_now(models: Models, engine: sa.Engine, job_id: str, note: str | None = None,
              actor: str = DEFAULT_ACTOR) -> JobInfo:
    """Make a pending job (in backoff, or scheduled) eligible now; journaled.  ``InvalidTransition`` otherwise."""
    return edit(models, Registry(()), engine, job_id, run_now=True, note=note, actor=actor)
