"""A job's durable steps on its dashboard page, interleaved with its journal (one short read)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa

from venturi_sa.models import Models
from venturi_sa.ops.job_steps import StepInfo, TimelineRow, timeline
from venturi_sa.ops.transaction import short_transaction
from venturi_sa.storage import steps as step_store


def steps_timeline(models: Models, engine: sa.Engine, job_id: str, journal: Sequence[Any]) -> list[TimelineRow]:
    """The job's steps, sleeps and waits with its journal entries in time order; empty for a job without steps
    (or one archived: its steps went with its row).  One statement."""
    with short_transaction(models, engine) as session:
        records = step_store.read(models, session, job_id)
    steps = [StepInfo(r.name, r.entry, r.result, r.run_no, r.started_at, r.finished_at, r.wake_at, r.resolution)
             for r in records]
    return timeline(journal, steps) if steps else []
