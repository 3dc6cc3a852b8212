"""A job's journal a page at a time, with consecutive ``merged`` rows folded into one line.

Every journal row stays in the table (each absorbed enqueue keeps its own
``merged`` row); only the reads here fold a run of consecutive ``merged`` rows
into one line carrying its count and its first and last times, so a debounce
key merged 10,000 times reads as one line.  Pages are keyset pages on the
journal id: a page starts at a line's first id, so it never splits a run.
Plain ``SELECT``s through ``_journal_job (job_id, id)``, without locks, in the
caller's transaction; nothing here commits.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from venturi_sa.models import Models
from venturi_sa.storage.params import Runner


@dataclass(frozen=True, kw_only=True)
class JournalPageParams:
    """The lines of ``job_id``'s journal from entry id ``start`` on (None: the first), at most ``limit``."""

    job_id: str
    start: int | None = None
    limit: int = 100


_PAGE = """
WITH marked AS (
    SELECT e.id, e.recorded_at,
           coalesce(e.outcome = 'merged' AND lag(e.outcome) OVER (ORDER BY e.id) = 'merged', false) AS continues
    FROM {journal} AS e
    WHERE e.job_id = :job_id AND e.id >= :start
), numbered AS (
    SELECT m.id, m.recorded_at, count(*) FILTER (WHERE NOT m.continues) OVER (ORDER BY m.id) AS line
    FROM marked AS m
), lines AS (
    SELECT min(n.id) AS id, max(n.id) AS last_id, count(*) AS entries, max(n.recorded_at) AS last_recorded_at
    FROM numbered AS n GROUP BY n.line
    ORDER BY 1 LIMIT :limit
)
SELECT e.id, e.job_id, e.kind, e.run_no, e.recorded_at, e.outcome, e.note, e.attachment,
       l.entries, l.last_id, l.last_recorded_at
FROM lines AS l JOIN {journal} AS e ON e.id = l.id
ORDER BY e.id
"""

_SUMMARY = """
SELECT (SELECT count(*) FROM {journal} AS e WHERE e.job_id = :job_id) AS total,
       (SELECT e.outcome FROM {journal} AS e WHERE e.job_id = :job_id ORDER BY e.id DESC LIMIT 1) AS outcome,
       (SELECT e.note FROM {journal} AS e WHERE e.job_id = :job_id AND e.note IS NOT NULL
        ORDER BY e.id DESC LIMIT 1) AS note
"""

_STATEMENTS: dict[tuple[str, str], sa.TextClause] = {}


def _statement(models: Models, name: str, text: str, **columns: Any) -> sa.TextClause:
    key = (models.prefix, name)
    if key not in _STATEMENTS:
        clause = sa.text(text.format(journal=models.names.journal))
        _STATEMENTS[key] = clause.columns(**columns) if columns else clause  # type: ignore[assignment]
    return _STATEMENTS[key]


def page_statement(models: Models) -> sa.TextClause:
    """The statement :func:`journal_page` runs; binds ``job_id``, ``start`` and ``limit``."""
    return _statement(models, "page", _PAGE, attachment=postgresql.JSONB(none_as_null=True))


def journal_page(models: Models, runner: Runner, params: JournalPageParams) -> list[sa.Row[Any]]:
    """Up to ``limit`` lines, oldest first: each the journal row that starts it (its columns) with ``entries``
    (1, or the length of a run of consecutive ``merged`` rows), ``last_id`` and ``last_recorded_at``.

    Reads the job's journal rows from ``start`` on (the fold needs each row's
    predecessor), so a page costs the rows after its start, never the table.
    """
    return list(runner.execute(page_statement(models), {"job_id": params.job_id, "start": params.start or 0,
                                                        "limit": params.limit}))


@dataclass(frozen=True)
class JournalSummary:
    """How many journal rows a job has, its newest outcome and its newest note (None: none yet)."""

    total: int
    last_outcome: str | None
    last_note: str | None


def summary_statement(models: Models) -> sa.TextClause:
    """The statement :func:`journal_summary` runs; binds ``job_id``."""
    return _statement(models, "summary", _SUMMARY)


def journal_summary(models: Models, runner: Runner, job_id: str) -> JournalSummary:
    """The job's :class:`JournalSummary`: an index-only count of ``_journal_job`` and two backward probes."""
    row = runner.execute(summary_statement(models), {"job_id": job_id}).one()
    return JournalSummary(int(row.total), row.outcome, row.note)
