"""Edits of pending jobs: priority, when they run, payload; one journal row each.

Runs in the caller's transaction and never commits.  The row is locked
first, checked to be ``pending`` and written with that status repeated in
the ``WHERE`` clause with its journal row (``storage.admin.guarded_write``),
so an edit and a claim or another action on the same job serialize: the edit
applies only while the job is still pending.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from venturi_sa.models import Models
from venturi_sa.states import Outcome, Status
from venturi_sa.storage import drivers
from venturi_sa.storage.admin import guarded_write, lock_statement
from venturi_sa.storage.params import Runner


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
