"""Fenced outcome writes: each changes the row only if the run still holds its claim."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session

from venturi_sa.models import Models
from venturi_sa.states import OUTCOME_STATUS, Status
from venturi_sa.storage.params import Fence, FinishParams


def fence_clause(models: Models, fence: Fence) -> Any:
    """``id``, ``status = 'claimed'``, ``claimed_by`` and ``run_count`` all still this run's."""
    job = models.Job
    return sa.and_(
        job.id == fence.job_id,
        job.status == Status.CLAIMED.value,
        job.claimed_by == fence.claimed_by,
        job.run_count == fence.run_count,
    )


def _row_values(models: Models, params: FinishParams) -> dict[str, Any]:
    job = models.Job
    # clock_timestamp(): the outcome transaction may have started when the handler did.
    now = sa.func.clock_timestamp()
    status = OUTCOME_STATUS[params.outcome]
    values: dict[str, Any] = {"status": status.value, "claimed_by": None, "claim_expires_at": None}
    if status.terminal:
        values["finished_at"] = now
    else:
        if params.visible_at is not None:
            values["visible_at"] = params.visible_at
        elif params.delay:
            values["visible_at"] = now + sa.literal(params.delay, sa.Interval)
        else:
            values["visible_at"] = now
    if params.failure:
        values["failure_count"] = job.failure_count + 1
    if params.save_carry:
        values["carry"] = params.carry
    return values


def journal_row(params: FinishParams) -> dict[str, Any]:
    fence = params.fence
    return {
        "job_id": fence.job_id,
        "kind": fence.kind,
        "run_no": fence.run_count,
        "outcome": params.outcome.value,
        "note": params.note,
        "attachment": params.attachment,
    }


def finish(models: Models, session: Session, params: FinishParams) -> bool:
    """Write one run's outcome and its journal row in ``session``; the caller commits.

    Returns False, writing nothing, if the fence no longer matches (the lease
    was lost); the caller must then roll the session back.
    """
    result = session.execute(
        sa.update(models.Job)
        .where(fence_clause(models, params.fence))
        .values(_row_values(models, params))
        .execution_options(synchronize_session=False)
    )
    if result.rowcount != 1:  # type: ignore[attr-defined]
        return False
    session.execute(
        sa.insert(models.JournalEntry).values(**journal_row(params))
    )
    return True
