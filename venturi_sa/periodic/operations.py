"""Operating schedules: list them, pause and resume one, find which fire inserted a job.

The public calls are the queue's (:class:`venturi_sa.ops.face.Operations`):
``queue.list_schedules(engine)``, ``queue.pause_schedule(engine, name)``,
``queue.resume_schedule(engine, name)`` and ``queue.run_schedule_now(engine,
name)``.  ``list_schedules``, ``set_paused`` and ``run_now`` here are their
deprecated former spellings: they warn (``DeprecationWarning`` naming the
queue method) and do the same, and go in the next release.

``fired_by`` and ``FireInfo`` are :func:`venturi_sa.ops.history.fired_by` and
:class:`venturi_sa.ops.records.FireInfo`, re-exported here.

Each call runs in its own short transaction on the given engine (see
:mod:`venturi_sa.ops.transaction`): committed on return, rolled back on any
error, never the application's session.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING

import sqlalchemy as sa

from venturi_sa.errors import VenturiError
from venturi_sa.models import Models
from venturi_sa.ops.history import fired_by as fired_by
from venturi_sa.ops.records import FireInfo as FireInfo
from venturi_sa.ops.records import ScheduleInfo, schedule_info
from venturi_sa.ops.transaction import short_transaction
from venturi_sa.periodic.timing import at_or_after, parse_spec
from venturi_sa.storage import schedules as schedules_store
from venturi_sa.storage.schedules import PauseParams

if TYPE_CHECKING:
    from venturi_sa.ops.face import Operations


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


def _deprecated(old: str, new: str) -> None:
    warnings.warn(f"venturi_sa.periodic.{old} is deprecated and goes in the next release: use {new}",
                  DeprecationWarning, stacklevel=3)


def list_schedules(models: Models, engine: sa.Engine) -> list[ScheduleInfo]:
    """Deprecated: ``queue.list_schedules(engine)``."""
    _deprecated("list_schedules(models, engine)", "queue.list_schedules(engine)")
    return schedule_infos(models, engine)


def set_paused(models: Models, engine: sa.Engine, name: str, paused: bool) -> None:
    """Deprecated: ``queue.pause_schedule(engine, name)`` / ``queue.resume_schedule(engine, name)``."""
    new = "queue.pause_schedule(engine, name)" if paused else "queue.resume_schedule(engine, name)"
    _deprecated("set_paused(models, engine, name, paused)", new)
    set_schedule_paused(models, engine, name, paused)


def run_now(queue: Operations, engine: sa.Engine, name: str) -> str:
    """Deprecated: ``queue.run_schedule_now(engine, name)``."""
    _deprecated("run_now(queue, engine, name)", "queue.run_schedule_now(engine, name)")
    return queue.run_schedule_now(engine, name)


__all__ = ["FireInfo", "ScheduleInfo", "fired_by", "list_schedules", "run_now", "schedule_infos", "set_paused",
           "set_schedule_paused"]
