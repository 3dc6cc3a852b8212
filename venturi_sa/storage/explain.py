"""The facts ``explain`` reads about one job: its row, last journal entry, pause, cancel request, place in line.

Reads only, in the caller's transaction.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa

from venturi_sa.models import Models
from venturi_sa.states import Status
from venturi_sa.storage.cancels import cancel_request
from venturi_sa.storage.history import job_columns
from venturi_sa.storage.params import Runner
from venturi_sa.storage.pauses import pause_of


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
    # The clock at this read, not the transaction's start: read in the caller's transaction, a job it
    # enqueued (visible at its INSERT's statement_timestamp()) is due, as it is to a claim after commit.
    now = runner.execute(sa.select(sa.func.statement_timestamp())).scalar_one()
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
                                     job.visible_at <= sa.func.statement_timestamp(), first).limit(limit).subquery())
    return int(runner.execute(sa.select(sa.func.count()).select_from(ahead)).scalar_one())


def _recent_activity(models: Models, runner: Runner, kind: str, window: timedelta) -> bool:
    """Whether a worker ran this kind lately: a job of it claimed now, or finished within ``window``."""
    job = models.Job
    since = sa.func.now() - sa.literal(window, sa.Interval)
    claimed = sa.exists().where(job.status == Status.CLAIMED.value, job.kind == kind)
    finished = sa.exists().where(job.status.in_([Status.COMPLETED.value, Status.DEAD.value]), job.kind == kind,
                                 job.finished_at > since, job.run_count > 0)
    return bool(runner.execute(sa.select(sa.or_(claimed, finished))).scalar_one())
