"""Archived jobs read as the jobs table's rows: one job, its journal and result, history across both, counts.

Plain ``SELECT`` statements over ``<prefix>_archive`` (see
:mod:`venturi_sa.storage.archive`), without locks; nothing here commits.
The archive's ``job`` and ``journal`` JSON leave out what its columns
repeat and top-level NULLs (:data:`~venturi_sa.storage.archive.JOB_KEYS`,
:data:`~venturi_sa.storage.archive.ENTRY_KEYS`): a missing key reads as
NULL, which decodes as the value left out did.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import JSONB

from venturi_sa.models import Models
from venturi_sa.storage import stats
from venturi_sa.storage.archive import ENTRY_KEYS, JOB_KEYS, is_jsonb
from venturi_sa.storage.history import HistoryParams, history_statement
from venturi_sa.storage.params import Runner


def job_columns(models: Models, source: Any = None) -> list[Any]:
    """The ``<prefix>_jobs`` columns, in table order, decoded from an archive row (labelled as the columns).

    ``source`` is the archive table (the default) or a subquery of its columns.
    """
    archive = models.archive_table if source is None else source
    job = sa.type_coerce(archive.c.job, JSONB)
    direct = set(JOB_KEYS)
    columns: list[Any] = []
    for column in models.jobs_table.c:
        if column.name in direct:
            columns.append(archive.c[column.name].label(column.name))
        elif is_jsonb(column):
            columns.append(sa.type_coerce(job[column.name], column.type).label(column.name))
        else:
            columns.append(sa.cast(job[column.name].astext, column.type).label(column.name))
    return columns


def job_statement(models: Models, job_id: str) -> sa.Select[Any]:
    """An archived job's row (the jobs table's columns), by id."""
    return sa.select(*job_columns(models)).where(models.archive_table.c.id == job_id)


def job_view_statement(models: Models, job_id: str) -> sa.Select[Any]:
    """An archived job as ``storage.history.job_view_statement`` returns a live one (fire and time limit)."""
    archive, fires = models.archive_table, models.fires_table
    return (sa.select(*job_columns(models), fires.c.schedule.label("fire_schedule"),
                      fires.c.fire_at.label("fire_at"), fires.c.fired_at.label("fired_at"),
                      archive.c.timeout.label("timeout"))
            .select_from(archive.outerjoin(fires, fires.c.job_id == archive.c.id))
            .where(archive.c.id == job_id))


def _entries(models: Models, job_id: str) -> tuple[Any, sa.Select[Any]]:
    archive = models.archive_table
    entry = sa.func.jsonb_array_elements(archive.c.journal).table_valued("value").lateral("entry")
    return entry, sa.select().select_from(archive).join(entry, sa.true()).where(archive.c.id == job_id)


def journal_statement(models: Models, job_id: str) -> sa.Select[Any]:
    """An archived job's journal rows (the journal table's columns), in ``id`` order."""
    entry, stmt = _entries(models, job_id)
    value = sa.type_coerce(entry.c.value, JSONB)
    columns = []
    for column in models.journal_table.c:
        if column.name in ENTRY_KEYS:  # the job's: job_id is its id
            own = "id" if column.name == "job_id" else column.name
            columns.append(models.archive_table.c[own].label(column.name))
        elif column.name == "attachment":
            columns.append(sa.type_coerce(value[column.name], column.type).label(column.name))
        else:
            columns.append(sa.cast(value[column.name].astext, column.type).label(column.name))
    return stmt.add_columns(*columns).order_by(sa.cast(value["id"].astext, sa.BigInteger))


def archived_result_sql(alias: str) -> str:
    """SQL text: the result of the archived job ``alias`` (an archive row), the attachment of its last ``completed``
    journal entry (NULL if it has none).  What ``queue.result`` and the parents' reads give for an archived job."""
    return (f"(SELECT e.value -> 'attachment' FROM jsonb_array_elements({alias}.journal) AS e "
            "WHERE e.value ->> 'outcome' = 'completed' ORDER BY CAST(e.value ->> 'id' AS bigint) DESC LIMIT 1)")


def archived_note_sql(alias: str) -> str:
    """SQL text: the note of the last journal entry of the archived job ``alias`` (NULL if it has none)."""
    return (f"(SELECT e.value ->> 'note' FROM jsonb_array_elements({alias}.journal) AS e "
            "ORDER BY CAST(e.value ->> 'id' AS bigint) DESC LIMIT 1)")


def result_statement(models: Models, job_id: str) -> sa.Select[Any]:
    """``(status, result)`` of an archived job: the attachment of its last ``completed`` journal entry."""
    archive = models.archive_table
    last = sa.type_coerce(sa.literal_column(archived_result_sql(archive.name)),
                          models.journal_table.c.attachment.type)
    return sa.select(archive.c.status, last.label("result")).where(archive.c.id == job_id)


def fetch_job(models: Models, runner: Runner, job_id: str) -> sa.Row[Any] | None:
    """The archived job's row as a jobs-table row, or None if it is not archived."""
    return runner.execute(job_statement(models, job_id)).first()


def fetch_job_view(models: Models, runner: Runner, job_id: str) -> sa.Row[Any] | None:
    """The archived job's view row (see :func:`job_view_statement`), or None if it is not archived."""
    return runner.execute(job_view_statement(models, job_id)).first()


def fetch_journal(models: Models, runner: Runner, job_id: str) -> Sequence[sa.Row[Any]]:
    """The archived job's journal rows in ``id`` order (empty if it is not archived)."""
    return runner.execute(journal_statement(models, job_id)).all()


def fetch_result(models: Models, runner: Runner, job_id: str) -> sa.Row[Any] | None:
    """``(status, result)`` of the archived job, or None if it is not archived."""
    return runner.execute(result_statement(models, job_id)).first()


# -- history across the live table and the archive ------------------------------------------

def history_statement_both(models: Models, params: HistoryParams) -> sa.Select[Any]:
    """A history page over ``<prefix>_jobs`` and the archive together, ``(created_at DESC, id DESC)``.

    Each branch is the page of its table (``limit + 1`` rows, keyset
    predicate and filters applied); the union is sorted and cut again.  One
    statement, one snapshot: a job moving while it runs is seen in exactly
    one branch, so keyset paging stays exact.  The archive branch is left
    out when the status filter admits no terminal status.
    """
    live = history_statement(models, params)
    if params.statuses and not {"completed", "dead"} & set(params.statuses):
        return live
    archive = models.archive_table
    arch = sa.select(*job_columns(models))
    if params.statuses:
        arch = arch.where(archive.c.status.in_(list(params.statuses)))
    if params.kind is not None:
        arch = arch.where(archive.c.kind == params.kind)
    if params.finished_after is not None:
        arch = arch.where(archive.c.finished_at >= params.finished_after)
    if params.finished_before is not None:
        arch = arch.where(archive.c.finished_at < params.finished_before)
    if params.after is not None:
        created_at, job_id = params.after
        arch = arch.where(sa.tuple_(archive.c.created_at, archive.c.id) < sa.tuple_(
            sa.literal(created_at, sa.DateTime(timezone=True)), sa.literal(job_id, sa.Text)))
    arch = arch.order_by(archive.c.created_at.desc(), archive.c.id.desc()).limit(params.limit + 1)
    both = sa.union_all(sa.select(live.subquery("live")), sa.select(arch.subquery("arch"))).subquery("page")
    return sa.select(*both.c).order_by(both.c.created_at.desc(), both.c.id.desc()).limit(params.limit + 1)


def fetch_history(models: Models, runner: Runner, params: HistoryParams) -> Sequence[sa.Row[Any]]:
    """One page plus at most one extra row, across both tables (see :func:`history_statement_both`)."""
    return runner.execute(history_statement_both(models, params)).all()

def counts(models: Models, runner: Runner) -> list[tuple[str, str, int]]:
    """``(status, kind, count)`` of the archive: a loose index scan of ``_archive_history``, as stats does."""
    rows = runner.execute(sa.text(stats.PAIR_COUNTS.format(table=models.names.archive)))
    return [(r[0], r[1], int(r[2])) for r in rows]


def archived_status(models: Models, runner: Runner, job_id: str) -> str | None:
    """The status of the archived job ``job_id``, or None if it is not archived."""
    value: str | None = runner.execute(
        sa.select(models.archive_table.c.status).where(models.archive_table.c.id == job_id)).scalar()
    return value


def kept_rows(models: Models, runner: Runner, job_id: str, table: sa.Table,
              order: Sequence[str]) -> list[sa.Row[Any]] | None:
    """The rows of ``table`` (``models.steps_table`` or ``signals_table``) the archived job keeps, in ``order``.

    None if ``job_id`` is not archived; ``[]`` if it is and kept none.  The
    rows are typed as ``table``'s (a JSON ``null`` result reads as None).
    """
    column = {models.steps_table.name: "steps", models.signals_table.name: "signals"}[table.name]
    names = ", ".join(f"r.{c.name}" for c in table.c)
    sql = sa.text(
        f"SELECT a.id AS archived, {names} FROM {models.names.archive} AS a "
        f"LEFT JOIN LATERAL jsonb_populate_recordset(NULL::{table.name}, a.{column}) AS r ON true "
        f"WHERE a.id = :job_id ORDER BY {', '.join(f'r.{c}' for c in order)}"
    ).columns(sa.column("archived", sa.Text), *(sa.column(c.name, c.type) for c in table.c))
    rows = runner.execute(sql, {"job_id": job_id}).all()
    if not rows:
        return None
    return [r for r in rows if r.job_id is not None or r.name is not None]
