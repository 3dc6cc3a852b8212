"""Retention cleanup SQL: delete terminal jobs finished before a cutoff, one batch at a time.

Only ``completed`` and ``dead`` rows are ever matched (the status predicate
is always present, whatever the caller filters on), so live rows are never
touched.  Journal rows go with their job by ``ON DELETE CASCADE`` (served
by ``_journal_job``).  Each batch is meant to be its own short transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session

from venturi_sa.models import Models
from venturi_sa.states import TERMINAL


@dataclass(frozen=True, kw_only=True)
class CleanupParams:
    """Which terminal rows to delete: ``finished_at < cutoff``, optional statuses and kind.

    ``statuses`` must be terminal statuses (empty: both ``completed`` and ``dead``).
    """

    cutoff: datetime
    statuses: Sequence[str] = ()
    kind: str | None = None
    batch_size: int = 1000


def db_cutoff(session: Session, older_than: timedelta) -> datetime:
    """``now() - older_than`` on the database clock."""
    value: datetime = session.execute(
        sa.select(sa.func.now() - sa.literal(older_than, sa.Interval))).scalar_one()
    return value


def _where(models: Models, params: CleanupParams) -> list[Any]:
    job = models.Job
    statuses = [s for s in TERMINAL if not params.statuses or s in params.statuses]
    clauses: list[Any] = [job.finished_at < params.cutoff, job.status.in_(statuses)]
    if params.kind is not None:
        clauses.append(job.kind == params.kind)
    return clauses


def batch_select_statement(models: Models, params: CleanupParams) -> sa.Select[Any]:
    """The ids of one batch, locked ``FOR UPDATE SKIP LOCKED`` (rows an admin holds are skipped)."""
    return (
        sa.select(models.Job.id)
        .where(*_where(models, params))
        .limit(params.batch_size)
        .with_for_update(skip_locked=True)
    )


def delete_batch_statement(models: Models, params: CleanupParams) -> sa.Delete:
    """``DELETE … WHERE id IN (one locked batch)``; the journal follows by cascade."""
    job = models.Job
    return (
        sa.delete(job)
        .where(job.id.in_(batch_select_statement(models, params).scalar_subquery()))
        .execution_options(synchronize_session=False)
    )


def count_statement(models: Models, params: CleanupParams) -> sa.Select[Any]:
    """How many rows a cleanup with ``params`` would delete now (the dry run)."""
    return sa.select(sa.func.count()).select_from(models.Job).where(*_where(models, params))


def delete_batch(models: Models, session: Session, params: CleanupParams) -> int:
    """Delete up to ``batch_size`` matching rows in ``session``; the caller commits."""
    result = session.execute(delete_batch_statement(models, params))
    return int(result.rowcount)  # type: ignore[attr-defined]


def count_matching(models: Models, session: Session, params: CleanupParams) -> int:
    return int(session.execute(count_statement(models, params)).scalar_one())
