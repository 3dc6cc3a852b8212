"""Operating schedules: list them, pause and resume one, fire one now.

The public calls are the queue's (:class:`venturi_sa.ops.face.Operations`):
``queue.list_schedules(engine)``, ``queue.pause_schedule(engine, name)``,
``queue.resume_schedule(engine, name)`` and ``queue.run_schedule_now(engine,
name)``; the deprecated ``venturi_sa.periodic.list_schedules``,
``set_paused`` and ``run_now`` call these.

Each call runs in its own short transaction on the given engine (see
:mod:`venturi_sa.ops.transaction`): committed on return, rolled back on any
error (nothing of it remains), and rolled back by PostgreSQL if the process
dies before the commit; never the application's session.
"""

from __future__ import annotations

import sqlalchemy as sa

from venturi_sa.errors import VenturiError
from venturi_sa.models import Models, new_job_id
from venturi_sa.ops.records import ScheduleInfo, schedule_info
from venturi_sa.ops.transaction import short_transaction
from venturi_sa.periodic.timing import at_or_after, parse_spec
from venturi_sa.storage import schedules as schedules_store
from venturi_sa.storage.enqueue import InsertParams, NewJob, insert_jobs
from venturi_sa.storage.schedules import PauseParams

FIRE_ISOLATION = "READ COMMITTED"  # as the workers' fire transactions (venturi_sa.periodic.firing.ISOLATION)


def schedule_infos(models: Models, engine: sa.Engine) -> list[ScheduleInfo]:
    """Every stored schedule, removed ones included, by name (read-only)."""
    with short_transaction(models, engine) as session:
        rows = schedules_store.all_schedules(models, session)
    return [schedule_info(r) for r in rows]


def set_schedule_paused(models: Models, engine: sa.Engine, name: str, paused: bool) -> None:
    """Pause (stops firing) or resume (fires again from its next fire time after now) schedule ``name``.

    Fire times that passed while paused are not caught up.  ``VenturiError``
    if there is no live schedule of that name.
    """
    with short_transaction(models, engine) as session:
        next_at = None
        if not paused:
            row = next((r for r in schedules_store.all_schedules(models, session) if r.name == name), None)
            if row is not None:
                now = schedules_store.reconcile_lock(models, session)
                next_at = at_or_after(parse_spec(row.timing, row.tz), now)
        if not schedules_store.set_paused(models, session, PauseParams(name=name, paused=paused, next_at=next_at)):
            raise VenturiError(f"no schedule named {name!r} (see `venturi schedules`)")


def run_now(models: Models, engine: sa.Engine, name: str, notify_channel: str | None) -> str:
    """Fire schedule ``name`` once now, outside its timing and policies; returns the job id.

    The job, its ``_fires`` row (fire time: the database clock now) and the
    schedule's last-job columns commit together (the job's ``NOTIFY`` on
    ``notify_channel``, if any, is delivered on that commit); the next fire
    time does not move.  ``VenturiError`` if there is no live schedule of
    that name.
    """
    with short_transaction(models, engine, FIRE_ISOLATION) as session:
        due = schedules_store.lock_due(models, session, schedules_store.LockDueParams(name=name))
        if due is None or due.row.removed_at is not None:
            raise VenturiError(f"no schedule named {name!r} (see `venturi schedules`)")
        row, job_id = due.row, new_job_id()
        if not schedules_store.record_fires(models, session, schedules_store.RecordFiresParams(
                schedule=name, fires=[schedules_store.FireRecord(fire_at=due.now, job_id=job_id)])):
            raise VenturiError(f"schedule {name!r} fired at this very instant already; run it again")
        insert_jobs(models, session, InsertParams(
            jobs=[NewJob(id=job_id, kind=row.kind, payload=row.payload, priority=row.priority)],
            notify_channel=notify_channel))
        schedules_store.advance(models, session, schedules_store.AdvanceParams(
            name=name, due=None, next_at=None, last_at=due.now, last_job=job_id, fired=1, skipped=0))
    return job_id


__all__ = ["FIRE_ISOLATION", "run_now", "schedule_infos", "set_schedule_paused"]
