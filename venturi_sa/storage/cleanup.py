"""Retention cleanup SQL: delete terminal jobs finished before a cutoff, one batch at a time.

Only ``completed`` and ``dead`` rows are ever matched (the status predicate
is always present, whatever the caller filters on), so live rows are never
touched.  Journal rows go with their job by ``ON DELETE CASCADE`` (served
by ``_journal_job``).  Each batch is meant to be its own short transaction:
nothing here commits, a rolled-back batch deletes nothing, and the rows a
batch locks stay locked until the caller's transaction ends.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.sql.dml import ReturningDelete

from venturi_sa.models import Models
from venturi_sa.states import TERMINAL
from venturi_sa.storage import dependents
from venturi_sa.storage.params import Runner


@dataclass(frozen=True, kw_only=True)
class CleanupParams:
    """Which terminal rows to delete: ``finished_at < cutoff``, optional statuses and kind.

    ``statuses`` must be terminal statuses (empty: both ``completed`` and ``dead``).
    ``floor`` (the last batch's newest ``finished_at``) lets each batch start
    its index range scan where the previous one ended, so a long cleanup
    never rescans the entries it already deleted.
    """

    cutoff: datetime
    statuses: Sequence[str] = ()
    kind: str | None = None
    batch_size: int = 1000
    floor: datetime | None = None


@dataclass(frozen=True, kw_only=True)
class CutoffParams:
    """A cutoff relative to the database clock: ``now() - older_than``."""

    older_than: timedelta


def db_cutoff(runner: Runner, params: CutoffParams) -> datetime:
    """``now() - older_than`` on the database clock (read once; pass it on in :class:`CleanupParams`)."""
    value: datetime = runner.execute(
        sa.select(sa.func.now() - sa.literal(params.older_than, sa.Interval))).scalar_one()
    return value


def _where(models: Models, params: CleanupParams) -> list[Any]:
    job = models.Job
    statuses = [s for s in TERMINAL if not params.statuses or s in params.statuses]
    clauses: list[Any] = [job.finished_at < params.cutoff, job.status.in_(statuses),
                          dependents.no_live_dependent(models, job.id)]  # a parent stays while its dependents wait
    if params.kind is not None:
        clauses.append(job.kind == params.kind)
    if params.floor is not None:
        clauses.append(job.finished_at >= params.floor)
    return clauses


def batch_select_statement(models: Models, params: CleanupParams) -> sa.Select[Any]:
    """The ids of one batch, oldest ``finished_at`` first, locked ``FOR UPDATE SKIP LOCKED``.

    Rows another transaction holds (an admin action, say) are skipped, never waited for.
    """
    job = models.Job
    return (
        sa.select(job.id)
        .where(*_where(models, params))
        .order_by(job.finished_at)
        .limit(params.batch_size)
        .with_for_update(skip_locked=True)
    )


def delete_batch_statement(models: Models, params: CleanupParams) -> ReturningDelete[Any]:
    """``DELETE … WHERE id = ANY(ARRAY(one locked batch)) RETURNING finished_at``.

    The ``ARRAY(...)`` runs once, so the delete itself is primary-key lookups
    (a plain ``IN (subquery)`` lets the planner hash-join against a full scan).
    The journal follows by cascade through ``_journal_job``.
    """
    job = models.Job
    batch = sa.func.ARRAY(batch_select_statement(models, params).scalar_subquery())
    return (
        sa.delete(job)
        .where(job.id == sa.any_(batch))
        .returning(job.finished_at)
        .execution_options(synchronize_session=False)
    )


def count_statement(models: Models, params: CleanupParams) -> sa.Select[Any]:
    """How many rows a cleanup with ``params`` would delete now (the dry run)."""
    return sa.select(sa.func.count()).select_from(models.Job).where(*_where(models, params))


def delete_batch(models: Models, runner: Runner, params: CleanupParams) -> tuple[int, datetime | None]:
    """Delete up to ``batch_size`` matching rows in ``runner``'s transaction; the caller commits.

    Returns how many were deleted and the newest ``finished_at`` among them
    (the next batch's ``floor``).
    """
    finished = list(runner.execute(delete_batch_statement(models, params)).scalars())
    return len(finished), max(finished, default=None)


def count_matching(models: Models, runner: Runner, params: CleanupParams) -> int:
    """How many rows match ``params`` now, locked ones included; ``batch_size`` does not limit it."""
    return int(runner.execute(count_statement(models, params)).scalar_one())
