"""The deprecated module-level schedule operations: ``list_schedules``, ``set_paused`` and ``run_now``.

The public calls are the queue's (:class:`venturi_sa.ops.face.Operations`):
``queue.list_schedules(engine)``, ``queue.pause_schedule(engine, name)``,
``queue.resume_schedule(engine, name)`` and ``queue.run_schedule_now(engine,
name)``, whose bodies are in :mod:`venturi_sa.ops.schedules`.
``list_schedules``, ``set_paused`` and ``run_now`` here are their deprecated
former spellings: they warn (``DeprecationWarning`` naming the queue method)
and do the same, and go in the next release.

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

from venturi_sa.models import Models
from venturi_sa.ops import schedules as actions  # the module, not its names: see below
from venturi_sa.ops.history import fired_by as fired_by
from venturi_sa.ops.records import FireInfo as FireInfo
from venturi_sa.ops.records import ScheduleInfo

if TYPE_CHECKING:
    from venturi_sa.ops.face import Operations

# ``actions`` is imported as a module because importing venturi_sa.ops.schedules runs this package's
# __init__ (for venturi_sa.periodic.timing), which imports this module while ops.schedules is half-imported.


def _deprecated(old: str, new: str) -> None:
    warnings.warn(f"venturi_sa.periodic.{old} is deprecated and goes in the next release: use {new}",
                  DeprecationWarning, stacklevel=3)


def list_schedules(models: Models, engine: sa.Engine) -> list[ScheduleInfo]:
    """Deprecated: ``queue.list_schedules(engine)``."""
    _deprecated("list_schedules(models, engine)", "queue.list_schedules(engine)")
    return actions.schedule_infos(models, engine)


def set_paused(models: Models, engine: sa.Engine, name: str, paused: bool) -> None:
    """Deprecated: ``queue.pause_schedule(engine, name)`` / ``queue.resume_schedule(engine, name)``."""
    new = "queue.pause_schedule(engine, name)" if paused else "queue.resume_schedule(engine, name)"
    _deprecated("set_paused(models, engine, name, paused)", new)
    actions.set_schedule_paused(models, engine, name, paused)


def run_now(queue: Operations, engine: sa.Engine, name: str) -> str:
    """Deprecated: ``queue.run_schedule_now(engine, name)``."""
    _deprecated("run_now(queue, engine, name)", "queue.run_schedule_now(engine, name)")
    return queue.run_schedule_now(engine, name)


__all__ = ["FireInfo", "ScheduleInfo", "fired_by", "list_schedules", "run_now", "set_paused"]
