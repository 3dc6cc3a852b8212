"""Reads of the dependency tables: a job's parents and dependents, why it waits, how many wait.

Plain ``SELECT``s without locks, in the caller's transaction.  A parent that
moved to the archive is read from it (its kind, status, result and note, from
the journal the archive row keeps, as ``queue.result`` reads it), and so are
the parents of a dependent that moved there itself (the links its archive
row keeps, see :mod:`venturi_sa.storage.archive`), and the dependents of a
parent that moved (the ``dependents`` its archive row keeps).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from venturi_sa.models import Models
from venturi_sa.storage.archive_reads import archived_note_sql, archived_result_sql
from venturi_sa.storage.durable_params import ParentInfo, ParentsParams
from venturi_sa.storage.params import Runner

_IDS = postgresql.ARRAY(sa.Text)


def _names(models: Models) -> dict[str, str]:
    n = models.names
    return {"jobs": n.jobs, "journal": n.journal, "archive": n.archive,
            "waits": models.workflow.waits_table.name, "parents": models.workflow.parents_table.name,
            "archived_result": archived_result_sql("a"), "archived_note": archived_note_sql("a")}


_STATEMENTS: dict[tuple[str, str], sa.TextClause] = {}


def _statement(models: Models, name: str, text: str, **columns: Any) -> sa.TextClause:
    key = (models.prefix, name)
    if key not in _STATEMENTS:
        clause = sa.text(text.format(**_names(models)))
        _STATEMENTS[key] = clause.columns(**columns) if columns else clause  # type: ignore[assignment]
    return _STATEMENTS[key]


_PARENTS = """
WITH links AS (
    SELECT p.position, p.parent_id FROM {parents} AS p WHERE p.job_id = :job_id
    UNION ALL
    SELECT CAST(e.value ->> 'position' AS integer), e.value ->> 'parent_id'
    FROM {archive} AS d, jsonb_array_elements(d.job -> 'after') AS e
    WHERE d.id = :job_id
)
SELECT l.parent_id AS id, s.kind, s.status, s.result, s.note
FROM links AS l
LEFT JOIN LATERAL (
    SELECT j.kind, j.status,
           (SELECT e.attachment FROM {journal} AS e
            WHERE e.job_id = j.id AND e.outcome = 'completed' ORDER BY e.id DESC LIMIT 1) AS result,
           (SELECT e.note FROM {journal} AS e WHERE e.job_id = j.id ORDER BY e.id DESC LIMIT 1) AS note
    FROM {jobs} AS j WHERE j.id = l.parent_id
    UNION ALL
    SELECT a.kind, a.status, {archived_result}, {archived_note}
    FROM {archive} AS a WHERE a.id = l.parent_id
    LIMIT 1
) AS s ON true
WHERE l.position >= :offset
ORDER BY l.position
LIMIT :limit
"""


def parents(models: Models, runner: Runner, params: ParentsParams) -> list[ParentInfo]:
    """The job's parents ``(id, kind, status, result, note)``, in the order ``after=`` gave them.

    ``result`` is the attachment of the parent's last ``completed`` journal
    row (None unless it completed), ``note`` its last journal note: read
    from the archive row's journal when the parent was archived.  The links
    are the live ``<prefix>_parents`` rows, or the ones the archive row of an
    archived dependent keeps.  Each parent is primary-key probes (the jobs
    table, then the archive's days only if it is not live), so the cost
    does not grow with either table.
    """
    rows = runner.execute(parents_statement(models), {"job_id": params.job_id, "offset": params.offset,
                                                      "limit": params.limit})
    return [ParentInfo(id=r.id, kind=r.kind, status=r.status, result=r.result, note=r.note) for r in rows]


def parents_statement(models: Models) -> sa.TextClause:
    """The statement :func:`parents` runs; binds ``job_id``, ``offset`` and ``limit``."""
    return _statement(models, "parents", _PARENTS, id=sa.Text, kind=sa.Text, status=sa.Text,
                      result=postgresql.JSONB(none_as_null=True), note=sa.Text)


_PARENT_COUNTS = """
WITH links AS (
    SELECT p.parent_id FROM {parents} AS p WHERE p.job_id = :job_id
    UNION ALL
    SELECT e.value ->> 'parent_id'
    FROM {archive} AS d, jsonb_array_elements(d.job -> 'after') AS e
    WHERE d.id = :job_id
)
SELECT coalesce(j.status, (SELECT a.status FROM {archive} AS a WHERE a.id = l.parent_id LIMIT 1), 'deleted')
       AS status, count(*) AS n
FROM links AS l LEFT JOIN {jobs} AS j ON j.id = l.parent_id
GROUP BY 1 ORDER BY 1
"""


def parent_counts(models: Models, runner: Runner, job_id: str) -> dict[str, int]:
    """``{status: count}`` of the job's parents (``"deleted"``: in neither the jobs table nor the archive).

    One statement over the same links as :func:`parents`; a parent missing
    from the jobs table is looked up in the archive only then (``coalesce``
    evaluates the probe lazily).  Its cost grows with the number of parents,
    never with the tables.
    """
    rows = runner.execute(_statement(models, "parent_counts", _PARENT_COUNTS), {"job_id": job_id})
    return {r.status: int(r.n) for r in rows}


@dataclass(frozen=True, kw_only=True)
class DependentsParams:
    """The dependents of ``job_id`` oldest first, after ``(created_at, id)`` ``after``, at most ``limit``."""

    job_id: str
    after: tuple[datetime, str] | None = None
    limit: int | None = None


_DEPENDENT_LINKS = """
WITH links AS (
    SELECT p.job_id, p.policy FROM {parents} AS p WHERE p.parent_id = :job_id
    UNION
    SELECT e.value ->> 'job_id', e.value ->> 'policy'
    FROM {archive} AS a, jsonb_array_elements(a.job -> 'dependents') AS e
    WHERE a.id = :job_id AND NOT EXISTS (SELECT 1 FROM {jobs} AS live WHERE live.id = :job_id)
), found AS (
    SELECT l.job_id AS id, s.kind, s.status, l.policy, s.created_at
    FROM links AS l
    JOIN LATERAL (
        SELECT j.kind, j.status, j.created_at FROM {jobs} AS j WHERE j.id = l.job_id
        UNION ALL
        SELECT d.kind, d.status, d.created_at FROM {archive} AS d WHERE d.id = l.job_id
        LIMIT 1
    ) AS s ON true
)
"""
_DEPENDENTS = _DEPENDENT_LINKS + """
SELECT f.id, f.kind, f.status, f.policy, f.created_at FROM found AS f
WHERE CAST(:after_at AS timestamptz) IS NULL
   OR (f.created_at, f.id) > (CAST(:after_at AS timestamptz), CAST(:after_id AS text))
ORDER BY f.created_at, f.id
LIMIT :limit
"""


def dependents(models: Models, runner: Runner, params: DependentsParams) -> list[sa.Row[Any]]:
    """Rows ``(id, kind, status, policy, created_at)`` of the jobs that named the job in ``after=``, oldest
    first, from ``params.after`` on, at most ``params.limit`` (None: all).

    The links are the live ``<prefix>_parents`` rows naming the job
    (``_parents_parent``) and, if the job is archived (not live: only then
    are the archive's days probed), the ``dependents`` its archive row keeps
    (see :mod:`venturi_sa.storage.archive`), each pair once; each
    dependent is then primary-key probes (the jobs table, then the
    archive's days only if it is not live), and a top-N sort of them.  A
    dependent in neither table is left out.
    """
    after_at, after_id = params.after if params.after is not None else (None, None)
    values = {"job_id": params.job_id, "after_at": after_at, "after_id": after_id, "limit": params.limit}
    return list(runner.execute(dependents_statement(models), values))


def dependents_statement(models: Models) -> sa.TextClause:
    """The statement :func:`dependents` runs; binds ``job_id``, ``after_at``, ``after_id`` and ``limit``."""
    return _statement(models, "dependents", _DEPENDENTS)


_DEPENDENT_COUNTS = _DEPENDENT_LINKS + """
SELECT f.status, count(*) AS n FROM found AS f GROUP BY f.status ORDER BY f.status
"""


def dependent_counts(models: Models, runner: Runner, job_id: str) -> dict[str, int]:
    """``{status: count}`` of the job's dependents: the same links and probes as :func:`dependents`."""
    rows = runner.execute(_statement(models, "dependent_counts", _DEPENDENT_COUNTS), {"job_id": job_id})
    return {r.status: int(r.n) for r in rows}


@dataclass(frozen=True, kw_only=True)
class Waiting:
    """A job with parents: how many it has, how many are unfinished, and the first unfinished ones."""

    total: int
    remaining: int
    unfinished: tuple[str, ...]


_WAITING = """
SELECT w.remaining,
       (SELECT count(*) FROM {parents} AS p WHERE p.job_id = w.job_id) AS total,
       ARRAY(SELECT p.parent_id FROM {parents} AS p WHERE p.job_id = w.job_id AND NOT p.done
             ORDER BY p.position LIMIT :shown) AS unfinished
FROM {waits} AS w WHERE w.job_id = :job_id
"""


def waiting(models: Models, runner: Runner, job_id: str, shown: int = 5) -> Waiting | None:
    """The job's parent counts and up to ``shown`` unfinished parent ids; None if it has no parents."""
    row = runner.execute(_statement(models, "waiting", _WAITING), {"job_id": job_id, "shown": shown}).first()
    if row is None:
        return None
    return Waiting(total=row.total, remaining=row.remaining, unfinished=tuple(row.unfinished))


_CYCLING = """
WITH RECURSIVE up(id) AS (
    SELECT p.parent_id FROM {parents} AS p WHERE p.job_id = ANY(:ids)
    UNION
    SELECT p.parent_id FROM {parents} AS p JOIN up ON p.job_id = up.id
)
SELECT up.id FROM up WHERE up.id = ANY(:ids) ORDER BY up.id LIMIT 1
"""


def first_in_cycle(models: Models, runner: Runner, job_ids: list[str]) -> str | None:
    """The smallest of ``job_ids`` that is its own ancestor through the dependency rows, or None.

    Walks every ancestor of ``job_ids`` once (``UNION`` drops repeats, so
    the walk ends even on a cycle), with the rows the caller's transaction
    sees, its own uncommitted ones included.
    """
    statement = _statement(models, "first_in_cycle", _CYCLING).bindparams(sa.bindparam("ids", type_=_IDS))
    found = runner.execute(statement, {"ids": job_ids}).scalar()
    return None if found is None else str(found)
