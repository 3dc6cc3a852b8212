"""The dashboard's reads of the archive, merged with its reads of ``<prefix>_jobs`` (see ``storage/dashboard.py``).

Plain ``SELECT`` statements without locks; nothing here commits.  Run them
in the dashboard's transaction, at REPEATABLE READ where a page merges both
tables, so that a job moved meanwhile is read in exactly one of them.

* jobs list: the archive's page (the same filters, keyset walk and scan
  budget as the live page) merged with the live page in walk order, each
  cut where its walk stopped, so a page never skips or repeats a job;
* one job: the archived job's view, journal and ``now()``;
* the overview: dead jobs per kind (capped as the live count is), jobs
  finished in the window, the window's journal entries (only partitions
  moved in the window: an entry recorded then was moved then or later) and
  the latency percentiles over both tables at once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import JSONB

from venturi_sa.models import Models
from venturi_sa.states import Status
from venturi_sa.storage import archive_reads as archive
from venturi_sa.storage.dashboard import (
    DEAD_COUNT_CAP,
    FAILED_OUTCOMES,
    JobDetail,
    JobPage,
    JobPageParams,
    OverviewCounts,
    WindowParams,
    _like,
    fetch_job_page,
)
from venturi_sa.storage.overview import _bucket
from venturi_sa.storage.params import Runner


def _select(*columns: Any) -> sa.Select[Any]:
    return sa.select(*columns)


def _entries(source: Any) -> Any:
    """The journal entries of each row of ``source`` (a table or subquery with a ``journal`` column), LATERAL."""
    return sa.func.jsonb_array_elements(source.c.journal).table_valued("value").lateral("entry")


# -- the jobs list ---------------------------------------------------------------------------

def _walk(models: Models, params: JobPageParams) -> sa.Subquery:
    a, flt = models.archive_table, params.filter
    stmt = _select(a)
    if flt.created_after is not None:
        stmt = stmt.where(a.c.created_at >= flt.created_after)
    if flt.created_before is not None:
        stmt = stmt.where(a.c.created_at < flt.created_before)
    if params.after is not None:
        created_at, job_id = params.after
        key, at = sa.tuple_(a.c.created_at, a.c.id), sa.tuple_(sa.literal(created_at, sa.DateTime(timezone=True)),
                                                               sa.literal(job_id, sa.Text))
        stmt = stmt.where(key > at if params.oldest_first else key < at)
    order = [c.asc() if params.oldest_first else c.desc() for c in (a.c.created_at, a.c.id)]
    return stmt.order_by(*order).limit(params.scan if flt.narrows else params.limit + 1).subquery("walk")


def _matches(walk: sa.Subquery, params: JobPageParams) -> list[Any]:
    flt = params.filter
    conditions: list[Any] = []
    if flt.statuses:
        conditions.append(walk.c.status.in_(list(flt.statuses)))
    if flt.kind:
        conditions.append(walk.c.kind == flt.kind)
    if flt.text:
        pattern = _like(flt.text)
        entry = sa.func.jsonb_array_elements(walk.c.journal).table_valued("value").alias("noted")
        note = sa.type_coerce(entry.c.value, JSONB)["note"].astext
        noted = sa.exists(_select(sa.literal(1)).select_from(entry).where(note.ilike(pattern, escape="\\")))
        payload = sa.cast(sa.type_coerce(walk.c.job, JSONB)["payload"], sa.Text)
        conditions.append(sa.or_(payload.ilike(pattern, escape="\\"), noted))
    return conditions


def archive_page(models: Models, runner: Runner, params: JobPageParams) -> JobPage:
    """The archive's page for ``params``, as ``dashboard.fetch_job_page`` reads the live one (no errors)."""
    if params.filter.statuses and not {"completed", "dead"} & set(params.filter.statuses):
        return JobPage(rows=[], next_after=None)
    walk = _walk(models, params)
    order = [c.asc() if params.oldest_first else c.desc() for c in (walk.c.created_at, walk.c.id)]
    rows = runner.execute(_select(*archive.job_columns(models, walk)).where(*_matches(walk, params))
                          .order_by(*order).limit(params.limit + 1)).all()
    if len(rows) > params.limit:
        rows = rows[:params.limit]
        return JobPage(rows=rows, next_after=(rows[-1].created_at, rows[-1].id))
    if not params.filter.narrows:
        return JobPage(rows=rows, next_after=None)
    reverse = [c.desc() if params.oldest_first else c.asc() for c in (walk.c.created_at, walk.c.id)]
    last = _select(walk.c.created_at, walk.c.id).order_by(*reverse).limit(1).subquery("last")
    total = _select(sa.func.count()).select_from(walk).scalar_subquery()
    end = runner.execute(_select(total, last.c.created_at, last.c.id).select_from(last)).first()
    if end is None or end[0] < params.scan:
        return JobPage(rows=rows, next_after=None)
    return JobPage(rows=rows, next_after=(end[1], end[2]), scanned_to=end[1])


def _errors(models: Models, runner: Runner, job_ids: Sequence[str]) -> list[tuple[str, str, str | None]]:
    """``(job_id, outcome, note)`` of each archived job's newest failed journal entry."""
    if not job_ids:
        return []
    a = models.archive_table
    entry = _entries(a)
    value = sa.type_coerce(entry.c.value, JSONB)
    newest = sa.func.row_number().over(partition_by=a.c.id,
                                       order_by=sa.cast(value["id"].astext, sa.BigInteger).desc())
    failed = (_select(a.c.id.label("job_id"), value["outcome"].astext.label("outcome"),
                      value["note"].astext.label("note"), newest.label("n"))
              .select_from(a).join(entry, sa.true())
              .where(a.c.id.in_(list(job_ids)), value["outcome"].astext.in_(FAILED_OUTCOMES)).subquery("failed"))
    rows = runner.execute(_select(failed.c.job_id, failed.c.outcome, failed.c.note).where(failed.c.n == 1))
    return [(r[0], r[1], r[2]) for r in rows]


def _key(row: Any) -> tuple[datetime, str]:
    return (row.created_at, row.id)


def merge_pages(live: JobPage, arch: JobPage, params: JobPageParams) -> JobPage:
    """The page of both walks: rows in walk order up to the first place either walk stopped, ``limit`` at most."""
    backwards = not params.oldest_first
    stops = [p.next_after for p in (live, arch) if p.next_after is not None]
    stop = (max(stops) if backwards else min(stops)) if stops else None
    rows = sorted([*live.rows, *arch.rows], key=_key, reverse=backwards)
    if stop is not None:
        rows = [r for r in rows if (_key(r) >= stop if backwards else _key(r) <= stop)]
    if len(rows) > params.limit:
        rows = rows[:params.limit]
        return JobPage(rows=rows, next_after=_key(rows[-1]))
    scanned = stop[0] if stop is not None and (live.scanned_to is not None or arch.scanned_to is not None) else None
    return JobPage(rows=rows, next_after=stop, scanned_to=scanned)


def fetch_job_page_both(models: Models, runner: Runner, params: JobPageParams) -> JobPage:
    """One jobs-list page over ``<prefix>_jobs`` and the archive (run at REPEATABLE READ), with its last errors."""
    live = fetch_job_page(models, runner, params)
    arch = archive_page(models, runner, params)
    page = merge_pages(live, arch, params)
    if not params.errors:
        return page
    shown = {r.id for r in page.rows}
    errors = [e for e in live.errors if e[0] in shown]
    errors += _errors(models, runner, [r.id for r in arch.rows if r.id in shown])
    return replace(page, errors=errors)


# -- one job, a selection --------------------------------------------------------------------

def fetch_job_detail(models: Models, runner: Runner, job_id: str) -> JobDetail:
    """The archived job's view row and ``now()``; ``row`` None if it is not archived."""
    row = archive.fetch_job_view(models, runner, job_id)
    if row is None:
        return JobDetail(row=None, now=None)
    return JobDetail(row=row, now=runner.execute(_select(sa.func.now())).scalar_one())


def fetch_selection(models: Models, runner: Runner, job_ids: Sequence[str]) -> dict[str, tuple[str, str]]:
    """``{id: (kind, status)}`` of the archived ones among ``job_ids``."""
    a, found = models.archive_table, {}
    ids = list(job_ids)
    for start in range(0, len(ids), 500):
        for row in runner.execute(_select(a.c.id, a.c.kind, a.c.status).where(a.c.id.in_(ids[start:start + 500]))):
            found[row[0]] = (row[1], row[2])
    return found


# -- the overview ------------------------------------------------------------------------------

def dead_counts(models: Models, runner: Runner, cap: int = DEAD_COUNT_CAP) -> list[tuple[str, int]]:
    """``(kind, count)`` of archived dead jobs, each count stopping at ``cap`` (a skip scan of ``_archive_history``)."""
    a = models.archive_table
    dead = a.c.status == Status.DEAD.value
    kinds = _select(a.c.kind).where(dead).order_by(a.c.kind).limit(1).cte("dead_kinds", recursive=True)
    following = _select(a.c.kind).where(dead, a.c.kind > kinds.c.kind).order_by(a.c.kind).limit(1).scalar_subquery()
    kinds = kinds.union_all(_select(following).where(kinds.c.kind.is_not(None)))
    some = (_select(sa.literal(1).label("one")).where(dead, a.c.kind == kinds.c.kind).limit(cap)
            .correlate(kinds).subquery("some"))
    counted = _select(sa.func.count()).select_from(some).scalar_subquery()
    return [(r[0], int(r[1])) for r in runner.execute(_select(kinds.c.kind, counted).where(kinds.c.kind.is_not(None)))]


def add_archive_counts(models: Models, runner: Runner, raw: OverviewCounts, params: WindowParams) -> OverviewCounts:
    """``raw`` (the live counts) with the archive's dead jobs and jobs finished in the window added."""
    a = models.archive_table
    dead: dict[str, int] = dict(raw.dead)
    for kind, n in dead_counts(models, runner):
        dead[kind] = min(DEAD_COUNT_CAP, dead.get(kind, 0) + n)
    finished = runner.execute(_select(a.c.kind, a.c.status, sa.func.count())
                              .where(a.c.finished_at >= params.since(), a.c.moved_at >= params.since())
                              .group_by(a.c.kind, a.c.status)).all()
    return replace(raw, dead=sorted(dead.items()),
                   finished=[*raw.finished, *((r[0], r[1], int(r[2])) for r in finished)])


def activity(models: Models, runner: Runner, params: WindowParams) -> list[tuple[Any, str, int]]:
    """``(bucket, outcome, count)`` of the archived journal entries recorded in the window."""
    a = models.archive_table
    entry = _entries(a)
    value = sa.type_coerce(entry.c.value, JSONB)
    recorded = sa.cast(value["recorded_at"].astext, sa.DateTime(timezone=True))
    bucket = _bucket(recorded, params.bucket_seconds).label("bucket")
    outcome = value["outcome"].astext
    rows = runner.execute(_select(bucket, outcome, sa.func.count()).select_from(a).join(entry, sa.true())
                          .where(a.c.moved_at >= params.since(), recorded >= params.since())
                          .group_by(bucket, outcome))
    return [(r[0], r[1], int(r[2])) for r in rows]


def add_activity(live: Sequence[Any], archived: Sequence[tuple[Any, str, int]]) -> list[tuple[Any, str, int]]:
    """The live and archived activity rows, summed per ``(bucket, outcome)``."""
    summed: dict[tuple[Any, str], int] = {}
    for bucket, outcome, n in [*map(tuple, live), *archived]:
        summed[(bucket, outcome)] = summed.get((bucket, outcome), 0) + int(n)
    return [(b, o, n) for (b, o), n in sorted(summed.items(), key=lambda item: item[0][0])]


def latency_statement(models: Models, params: WindowParams) -> sa.Select[Any]:
    """``(bucket, p50, p95, count)`` from enqueue to ``completed`` for jobs finished in the window, both tables."""
    job, a = models.jobs_table, models.archive_table
    since = params.since()
    done = sa.union_all(
        _select(job.c.created_at, job.c.finished_at).where(
            job.c.finished_at >= since, job.c.finished_at.is_not(None), job.c.status == Status.COMPLETED.value),
        _select(a.c.created_at, a.c.finished_at).where(
            a.c.finished_at >= since, a.c.moved_at >= since, a.c.status == Status.COMPLETED.value),
    ).subquery("done")
    bucket = _bucket(done.c.finished_at, params.bucket_seconds).label("bucket")
    seconds = sa.extract("epoch", done.c.finished_at - done.c.created_at)
    return (_select(bucket, sa.func.percentile_cont(0.5).within_group(seconds),
                    sa.func.percentile_cont(0.95).within_group(seconds), sa.func.count())
            .group_by(bucket).order_by(bucket))


def fetch_latency(models: Models, runner: Runner, params: WindowParams) -> Sequence[sa.Row[Any]]:
    return runner.execute(latency_statement(models, params)).all()
