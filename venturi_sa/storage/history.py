"""Read-only history SQL: one job, its journal timeline, its result, and the keyset-paged listing.

Every statement here is a plain ``SELECT`` without locks, so it never waits
on a worker or an operator; builders are public so tests can ``EXPLAIN``
exactly the query the API runs.  Nothing here commits.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from venturi_sa.models import Models
from venturi_sa.states import Outcome
from venturi_sa.storage.params import Runner
from venturi_sa.storage.timeouts import own_timeout


@dataclass(frozen=True, kw_only=True)
class JobParams:
    """One job by id (its row, or its journal)."""

    job_id: str


@dataclass(frozen=True, kw_only=True)
class HistoryParams:
    """One page of history: filters, page size and the keyset position.

    ``after`` is the ``(created_at, id)`` of the last row of the previous
    page; the page holds rows strictly older in ``(created_at DESC, id DESC)``
    order.  ``finished_after`` is inclusive, ``finished_before`` exclusive.
    """

    statuses: Sequence[str] = ()
    kind: str | None = None
    finished_after: datetime | None = None
    finished_before: datetime | None = None
    limit: int = 50
    after: tuple[datetime, str] | None = None


def job_columns(models: Models) -> tuple[Any, ...]:
    """The ``<prefix>_jobs`` columns in table order (what ``JobInfo`` is built from)."""
    return tuple(models.jobs_table.c)


def job_statement(models: Models, job_id: str) -> sa.Select[Any]:
    """One job by primary key."""
    return sa.select(*job_columns(models)).where(models.Job.id == job_id)


def job_view_statement(models: Models, job_id: str) -> sa.Select[Any]:
    """The job's row, the schedule fire that inserted it and its own time limit, in one statement.

    A primary-key lookup LEFT JOIN ``_fires`` by ``_fires_job``, plus a
    scalar subquery probing ``_timeouts`` by its primary key.  The fire's
    columns are labelled ``fire_schedule``, ``fire_at`` and ``fired_at`` (all
    three NULL for a job no schedule inserted); ``timeout`` is NULL for a job
    without its own limit.
    """
    jobs, fires = models.jobs_table, models.fires_table
    return (sa.select(*job_columns(models), fires.c.schedule.label("fire_schedule"),
                      fires.c.fire_at.label("fire_at"), fires.c.fired_at.label("fired_at"),
                      own_timeout(models).label("timeout"))
            .select_from(jobs.outerjoin(fires, fires.c.job_id == jobs.c.id))
            .where(jobs.c.id == job_id))


def journal_statement(models: Models, job_id: str) -> sa.Select[Any]:
    """A job's journal in ``id`` order; ``_journal_job (job_id, id)`` serves it without a sort."""
    entry = models.JournalEntry
    return sa.select(*models.journal_table.c).where(entry.job_id == job_id).order_by(entry.id)


def result_statement(models: Models, job_id: str) -> sa.Select[Any]:
    """The job's ``status`` and the attachment of its last ``completed`` journal row (its result).

    One row per existing job; the subquery walks ``_journal_job (job_id, id)`` backwards.
    """
    entry = models.JournalEntry
    last_completed = (
        sa.select(entry.attachment)
        .where(entry.job_id == models.Job.id, entry.outcome == Outcome.COMPLETED.value)
        .order_by(entry.id.desc())
        .limit(1)
        .scalar_subquery()
    )
    return sa.select(models.Job.status, last_completed.label("result")).where(models.Job.id == job_id)


def older_than(models: Models, after: tuple[datetime, str]) -> sa.ColumnElement[bool]:
    """The keyset predicate: rows strictly after ``after = (created_at, id)`` in ``(created_at DESC, id DESC)``."""
    job = models.Job
    created_at, job_id = after
    return sa.tuple_(job.created_at, job.id) < sa.tuple_(
        sa.literal(created_at, sa.DateTime(timezone=True)), sa.literal(job_id, sa.Text))


def history_statement(models: Models, params: HistoryParams) -> sa.Select[Any]:
    """Newest first on ``(created_at DESC, id DESC)``, keyset-paged, ``limit + 1`` rows.

    The extra row tells the caller whether another page exists.  Unfiltered
    pages walk ``_jobs_created`` backwards; status/kind/finished filters can
    use ``_jobs_history (status, kind, finished_at)``.  Never uses OFFSET.
    """
    job = models.Job
    stmt = sa.select(*job_columns(models))
    if params.statuses:
        stmt = stmt.where(job.status.in_(list(params.statuses)))
    if params.kind is not None:
        stmt = stmt.where(job.kind == params.kind)
    if params.finished_after is not None:
        stmt = stmt.where(job.finished_at >= params.finished_after)
    if params.finished_before is not None:
        stmt = stmt.where(job.finished_at < params.finished_before)
    if params.after is not None:
        stmt = stmt.where(older_than(models, params.after))
    return stmt.order_by(job.created_at.desc(), job.id.desc()).limit(params.limit + 1)


def fetch_job(models: Models, runner: Runner, params: JobParams) -> sa.Row[Any] | None:
    """The job's row, or None if there is no such job."""
    return runner.execute(job_statement(models, params.job_id)).first()


def fetch_job_view(models: Models, runner: Runner, params: JobParams) -> sa.Row[Any] | None:
    """The job's row with its fire's columns (see :func:`job_view_statement`), or None if there is no such job."""
    return runner.execute(job_view_statement(models, params.job_id)).first()


def fetch_journal(models: Models, runner: Runner, params: JobParams) -> Sequence[sa.Row[Any]]:
    """The job's journal rows in ``id`` order (empty for an unknown job: the caller tells them apart)."""
    return runner.execute(journal_statement(models, params.job_id)).all()


def fetch_result(models: Models, runner: Runner, params: JobParams) -> sa.Row[Any] | None:
    """``(status, result)`` of the job, or None if there is no such job (see :func:`result_statement`)."""
    return runner.execute(result_statement(models, params.job_id)).first()


def fetch_history(models: Models, runner: Runner, params: HistoryParams) -> Sequence[sa.Row[Any]]:
    """One page plus at most one extra row (see :func:`history_statement`)."""
    return runner.execute(history_statement(models, params)).all()
