"""Fenced outcome writes: each changes the row only if the run still holds its claim."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql
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


def _batch_row(params: FinishParams) -> tuple[Any, ...]:
    status = OUTCOME_STATUS[params.outcome]
    return (
        params.fence.job_id,
        params.fence.claimed_by,
        params.fence.run_count,
        status.value,
        status.terminal,
        params.visible_at,
        params.delay or timedelta(0),
        1 if params.failure else 0,
        params.save_carry,
        params.carry if params.save_carry else None,
    )


_BATCH_COLUMNS = (
    sa.column("id", sa.Text),
    sa.column("claimed_by", sa.Text),
    sa.column("run_count", sa.Integer),
    sa.column("status", sa.Text),
    sa.column("finished", sa.Boolean),
    sa.column("visible_at", sa.DateTime(timezone=True)),
    sa.column("delay", sa.Interval),
    sa.column("failure_inc", sa.Integer),
    sa.column("save_carry", sa.Boolean),
    sa.column("carry", postgresql.JSONB),
)


def finish_many(models: Models, session: Session, batch: Sequence[FinishParams]) -> set[str]:
    """Write many runs' outcomes with one fenced UPDATE and one journal INSERT.

    Returns the ids whose fence still matched; only those get a journal row.
    Runs whose lease was lost are left untouched.  The caller commits.
    """
    if not batch:
        return set()
    job = models.Job
    rows = sa.values(*_BATCH_COLUMNS, name="outcome").data([_batch_row(p) for p in batch])
    now = sa.func.clock_timestamp()
    pending = rows.c.status == Status.PENDING.value
    stmt = (
        sa.update(job)
        .where(
            job.id == rows.c.id,
            job.status == Status.CLAIMED.value,
            job.claimed_by == rows.c.claimed_by,
            job.run_count == rows.c.run_count,
        )
        .values(
            status=rows.c.status,
            claimed_by=None,
            claim_expires_at=None,
            finished_at=sa.case((rows.c.finished, now), else_=job.finished_at),
            visible_at=sa.case(
                (pending, sa.func.coalesce(sa.cast(rows.c.visible_at, sa.DateTime(timezone=True)),
                                           now + sa.cast(rows.c.delay, sa.Interval))),
                else_=job.visible_at,
            ),
            failure_count=job.failure_count + rows.c.failure_inc,
            carry=sa.case((rows.c.save_carry, sa.cast(rows.c.carry, postgresql.JSONB)), else_=job.carry),
        )
        .returning(job.id)
        .execution_options(synchronize_session=False)
    )
    done = set(session.execute(stmt).scalars())
    entries = [journal_row(p) for p in batch if p.fence.job_id in done]
    if entries:
        session.execute(sa.insert(models.JournalEntry), entries)
    return done
