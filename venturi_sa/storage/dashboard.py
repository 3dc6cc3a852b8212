"""The dashboard's read SQL: filtered job pages, one job, workers, selections, change tokens.

Every statement is a plain ``SELECT`` without locks, served by a seed index;
builders are public so ``tests/integration/web`` can ``EXPLAIN`` exactly what a page runs.
Nothing here commits.

- **Job pages** walk ``_jobs_created (created_at, id)`` backwards (or forwards,
  oldest first) from a keyset position (never OFFSET); no other order has an
  index to walk, so no other column sorts.  A filter the index cannot answer (status, kind, text
  in the payload or a journal note) is checked row by row, so each page reads at
  most ``scan`` rows of the walk: a rare match costs one bounded page, never a
  scan of the whole table, and the page says where the walk stopped.
- The overview (counts, activity, latency) is :mod:`venturi_sa.storage.overview`,
  whose names this module re-exports.
- **Workers** are the ``claimed_by`` of claimed rows, through the partial
  ``_jobs_lease ... WHERE status = 'claimed'``.
- The **change token** (newest journal id, newest job) is two one-row index
  probes: the live feed polls it to decide whether pages changed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from venturi_sa.models import Models
from venturi_sa.states import Status
from venturi_sa.storage.history import job_columns, job_view_statement, older_than
from venturi_sa.storage.overview import (  # the overview's SQL, re-exported for the dashboard's callers
    DEAD_COUNT_CAP,
    FAILED_OUTCOMES,
    OverviewCounts,
    WindowParams,
    activity_statement,
    claimed_counts_statement,
    dead_counts_statement,
    fetch_activity,
    fetch_latency,
    fetch_overview_counts,
    finished_counts_statement,
    journal_floor,
    latency_statement,
)
from venturi_sa.storage.params import Runner

SCAN_BUDGET = 5000
"""How many rows of the keyset walk one filtered page reads at most."""


def _select(*columns: Any) -> sa.Select[Any]:
    """``select()`` typed loosely, the same under SQLAlchemy 2.0 and 2.1."""
    return sa.select(*columns)


@dataclass(frozen=True, kw_only=True)
class JobFilter:
    """Which jobs a page (or a bulk action) covers.

    ``created_after`` is inclusive, ``created_before`` exclusive.  ``text`` is
    matched case-insensitively, as a substring, against the payload's JSON text
    and the job's journal notes.
    """

    statuses: Sequence[str] = ()
    kind: str | None = None
    created_after: datetime | None = None
    created_before: datetime | None = None
    text: str | None = None

    @property
    def narrows(self) -> bool:
        """Whether rows must be checked one by one (anything but the time window)."""
        return bool(self.statuses or self.kind or self.text)


@dataclass(frozen=True, kw_only=True)
class JobPageParams:
    """One page: the filter, the page size, the keyset position, the scan budget."""

    filter: JobFilter
    limit: int = 50
    after: tuple[datetime, str] | None = None
    scan: int = SCAN_BUDGET
    oldest_first: bool = False
    """Walk ``_jobs_created`` forwards (oldest first) instead of backwards: the only other keyset order."""
    errors: bool = False
    """Also read each listed job's newest failed journal entry (:func:`last_errors_statement`)."""


def _like(text: str) -> str:
    """``text`` as a LIKE pattern matching it anywhere, wildcards in it escaped."""
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def _order(params: JobPageParams, *columns: Any) -> list[Any]:
    return [c.asc() if params.oldest_first else c.desc() for c in columns]


def _past(models: Models, params: JobPageParams) -> sa.ColumnElement[bool]:
    """Rows strictly beyond ``params.after`` in the walk's order."""
    assert params.after is not None
    if not params.oldest_first:
        return older_than(models, params.after)
    created_at, job_id = params.after
    return sa.tuple_(models.Job.created_at, models.Job.id) > sa.tuple_(
        sa.literal(created_at, sa.DateTime(timezone=True)), sa.literal(job_id, sa.Text))


def _walk(models: Models, params: JobPageParams) -> sa.Subquery:
    """The keyset walk: window and position only, newest (or oldest) first, at most ``scan`` rows."""
    job, flt = models.Job, params.filter
    stmt = _select(job.id, job.created_at)
    if flt.created_after is not None:
        stmt = stmt.where(job.created_at >= flt.created_after)
    if flt.created_before is not None:
        stmt = stmt.where(job.created_at < flt.created_before)
    if params.after is not None:
        stmt = stmt.where(_past(models, params))
    limit = params.scan if flt.narrows else params.limit + 1
    return stmt.order_by(*_order(params, job.created_at, job.id)).limit(limit).subquery("walk")


def _matches(models: Models, flt: JobFilter) -> list[Any]:
    """The row-by-row conditions of ``flt`` on the jobs table."""
    job, entry = models.Job, models.JournalEntry
    conditions: list[Any] = []
    if flt.statuses:
        conditions.append(job.status.in_(list(flt.statuses)))
    if flt.kind:
        conditions.append(job.kind == flt.kind)
    if flt.text:
        pattern = _like(flt.text)
        noted = sa.exists().where(entry.job_id == job.id, entry.note.ilike(pattern, escape="\\"))
        conditions.append(sa.or_(sa.cast(job.payload, sa.Text).ilike(pattern, escape="\\"), noted))
    return conditions


def job_page_statement(models: Models, params: JobPageParams) -> sa.Select[Any]:
    """Up to ``limit + 1`` matching jobs of the walk, newest first (the extra row: more follow)."""
    job, walk = models.Job, _walk(models, params)
    return (
        _select(*job_columns(models))
        .join_from(walk, job, job.id == walk.c.id)
        .where(*_matches(models, params.filter))
        .order_by(*_order(params, walk.c.created_at, walk.c.id))
        .limit(params.limit + 1)
    )


def walk_end_statement(models: Models, params: JobPageParams) -> sa.Select[Any]:
    """``(count, created_at, id)`` of the walk's last row: where a short filtered page stopped."""
    walk = _walk(models, params)
    reverse = replace(params, oldest_first=not params.oldest_first)
    last = _select(walk.c.created_at, walk.c.id).order_by(
        *_order(reverse, walk.c.created_at, walk.c.id)).limit(1).subquery("last")
    total = _select(sa.func.count()).select_from(walk).scalar_subquery()
    return _select(total, last.c.created_at, last.c.id).select_from(last)


@dataclass(frozen=True, kw_only=True)
class JobPage:
    """The rows of one page, and where the next one starts (None: the walk is done)."""

    rows: Sequence[sa.Row[Any]]
    next_after: tuple[datetime, str] | None
    scanned_to: datetime | None = None  # a short page stopped its walk here (more may match older)
    errors: Sequence[tuple[str, str, str | None]] = ()  # (job_id, outcome, note) when the params asked


def fetch_job_page(models: Models, runner: Runner, params: JobPageParams) -> JobPage:
    """One page (and its last errors, if asked): see :func:`_fetch_rows`."""
    page = _fetch_rows(models, runner, params)
    if not params.errors or not page.rows:
        return page
    rows = runner.execute(last_errors_statement(models, [r.id for r in page.rows])).all()
    return replace(page, errors=[(r[0], r[1], r[2]) for r in rows])


def _fetch_rows(models: Models, runner: Runner, params: JobPageParams) -> JobPage:
    """One page: one statement, plus one more when a filtered page came back short."""
    rows = runner.execute(job_page_statement(models, params)).all()
    if len(rows) > params.limit:
        rows = rows[:params.limit]
        return JobPage(rows=rows, next_after=(rows[-1].created_at, rows[-1].id))
    if not params.filter.narrows:
        return JobPage(rows=rows, next_after=None)
    end = runner.execute(walk_end_statement(models, params)).first()
    if end is None or end[0] < params.scan:
        return JobPage(rows=rows, next_after=None)
    return JobPage(rows=rows, next_after=(end[1], end[2]), scanned_to=end[1])


# -- workers ----------------------------------------------------------------------------------

WORKER_JOBS = 200
"""How many claimed jobs the workers page lists at most (the counts cover them all)."""


def workers_statement(models: Models) -> sa.Select[Any]:
    """Per ``claimed_by``: claimed jobs, expired leases, kinds, soonest and latest lease end."""
    job = models.Job
    expired = job.claim_expires_at < sa.func.now()
    return (
        _select(job.claimed_by, sa.func.count(), sa.func.count().filter(expired),
                sa.func.array_agg(sa.distinct(job.kind)), sa.func.min(job.claim_expires_at),
                sa.func.max(job.claim_expires_at), sa.func.max(job.run_count))
        .where(job.status == Status.CLAIMED.value, job.claim_expires_at.is_not(None))
        .group_by(job.claimed_by)
        .order_by(job.claimed_by)
    )


def claimed_statement(models: Models) -> sa.Select[Any]:
    """The claimed jobs, soonest lease end first (``_jobs_lease`` order), at most :data:`WORKER_JOBS`."""
    job = models.Job
    return (
        _select(job.id, job.kind, job.claimed_by, job.claim_expires_at, job.run_count,
                job.claim_expires_at < sa.func.now())
        .where(job.status == Status.CLAIMED.value, job.claim_expires_at.is_not(None))
        .order_by(job.claim_expires_at)
        .limit(WORKER_JOBS)
    )


def fetch_workers(models: Models, runner: Runner) -> tuple[Sequence[sa.Row[Any]], Sequence[sa.Row[Any]]]:
    return runner.execute(workers_statement(models)).all(), runner.execute(claimed_statement(models)).all()


# -- one job ------------------------------------------------------------------------------------

@dataclass(frozen=True, kw_only=True)
class JobDetail:
    """One job's view row (None: no such job) and the database clock.

    ``row`` is :func:`~venturi_sa.storage.history.job_view_statement`'s: the job's
    columns, the fire that inserted it and its own time limit.  Its journal is
    read a page at a time (:mod:`venturi_sa.storage.journal_pages`).
    """

    row: sa.Row[Any] | None
    now: datetime | None
    on_parents: bool = False
    """Whether it waits for unfinished parents (``after=``): its ``_waits`` count is above zero.

    Not its ``visible_at``: ``'infinity'`` also marks a wait for a signal with no timeout."""


def fetch_job_detail(models: Models, runner: Runner, job_id: str) -> JobDetail:
    """The job view by primary key, then (if found) ``now()`` and whether it waits for parents (a
    primary-key probe of ``_waits``, in the ``now()`` statement)."""
    row = runner.execute(job_view_statement(models, job_id)).first()
    if row is None:
        return JobDetail(row=None, now=None)
    waits = models.workflow.waits_table.c
    on_parents = sa.exists().where(waits.job_id == job_id, waits.remaining > 0)
    now, waiting = runner.execute(_select(sa.func.now(), on_parents)).one()
    return JobDetail(row=row, now=now, on_parents=bool(waiting))


# -- the jobs list's last errors ------------------------------------------------------

def last_errors_statement(models: Models, job_ids: Sequence[str]) -> sa.Select[Any]:
    """``(job_id, outcome, note)`` of each job's newest failed journal entry (``_journal_job``, per job)."""
    entry = models.JournalEntry
    newest = sa.func.row_number().over(partition_by=entry.job_id, order_by=entry.id.desc())
    failed = (_select(entry.job_id, entry.outcome, entry.note, newest.label("n"))
              .where(entry.job_id.in_(list(job_ids)), entry.outcome.in_(FAILED_OUTCOMES)).subquery("failed"))
    return _select(failed.c.job_id, failed.c.outcome, failed.c.note).where(failed.c.n == 1)


# -- a selection, checked before an action changes any of it ---------------------------

def selection_statement(models: Models, job_ids: Sequence[str]) -> sa.Select[Any]:
    """``(id, kind, status)`` of each of ``job_ids`` that exists (primary key probes)."""
    job = models.Job
    return _select(job.id, job.kind, job.status).where(job.id.in_(list(job_ids)))


@dataclass(frozen=True, kw_only=True)
class SelectionParams:
    """The ids an action was asked to change (at most a few thousand)."""

    job_ids: Sequence[str]


def fetch_selection(models: Models, runner: Runner, params: SelectionParams) -> dict[str, tuple[str, str]]:
    """``{id: (kind, status)}`` of the ids that exist, 500 ids per statement."""
    found: dict[str, tuple[str, str]] = {}
    ids = list(params.job_ids)
    for start in range(0, len(ids), 500):
        for row in runner.execute(selection_statement(models, ids[start:start + 500])):
            found[row[0]] = (row[1], row[2])
    return found


# -- the change token -----------------------------------------------------------------

def token_statement(models: Models) -> sa.Select[Any]:
    """``(newest journal id, newest job's created_at, its id)``: each a one-row backward index probe."""
    job, entry = models.Job, models.JournalEntry
    newest_entry = _select(entry.id).order_by(entry.id.desc()).limit(1).scalar_subquery()
    newest_job = _select(job.created_at, job.id).order_by(job.created_at.desc(), job.id.desc()).limit(1).subquery()
    return _select(newest_entry, newest_job.c.created_at, newest_job.c.id).select_from(
        sa.select(sa.literal(1)).subquery()).outerjoin(newest_job, sa.true())


def fetch_token(models: Models, runner: Runner) -> tuple[Any, ...]:
    row = runner.execute(token_statement(models)).one()
    return tuple(row)


__all__ = [
    "DEAD_COUNT_CAP", "FAILED_OUTCOMES", "OverviewCounts", "WindowParams", "activity_statement",
    "claimed_counts_statement", "dead_counts_statement", "fetch_activity", "fetch_latency",
    "fetch_overview_counts", "finished_counts_statement", "journal_floor", "latency_statement",
]
