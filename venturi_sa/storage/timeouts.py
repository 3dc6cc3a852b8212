"""Per-job time limits (``<prefix>_timeouts``, migration v6): an enqueue's ``timeout=`` overriding ``Task.timeout``.

Written in the caller's transaction right after the jobs it belongs to (the
row references its job, so it goes with it: ``ON DELETE CASCADE``), so it
commits, rolls back and vanishes with them.  The claim reads it in its
``RETURNING`` list (:func:`own_timeout`, one primary-key probe per claimed
row while the table has rows), and so does the job view operations read
(``storage.history.job_view_statement``).  Nothing here commits.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from venturi_sa.models import Models
from venturi_sa.storage.params import Runner


@dataclass(frozen=True, kw_only=True)
class TimeoutsParams:
    """Give each of ``job_ids`` (new jobs of this transaction) the time limit ``timeout`` (positive)."""

    job_ids: Sequence[str]
    timeout: timedelta


def own_timeout(models: Models) -> Any:
    """The jobs row's own time limit, NULL if it has none.

    A primary-key probe correlated to the row, behind an uncorrelated test
    whether the table has any row (an InitPlan, run once per statement: the
    first key of its primary-key index, so deleted rows are never read one
    by one): while no job has a time limit of its own, a claim of 100 rows
    makes no probe at all.
    """
    limit = models.JobTimeout
    probe = sa.select(limit.timeout).where(limit.job_id == models.Job.id).scalar_subquery()
    first = sa.select(limit.job_id).order_by(limit.job_id).limit(1).scalar_subquery()
    return sa.case((first.is_not(None), probe), else_=sa.null())


def set_timeouts(models: Models, runner: Runner, params: TimeoutsParams) -> None:
    """Insert one row per job, in one round trip (``INSERT … SELECT unnest(ids)``)."""
    if not params.job_ids:
        return
    ids = sa.func.unnest(sa.bindparam("timeout_ids", list(params.job_ids), type_=postgresql.ARRAY(sa.Text)))
    rows = sa.select(ids, sa.literal(params.timeout, sa.Interval))
    runner.execute(sa.insert(models.timeouts_table).from_select(["job_id", "timeout"], rows))
