"""SQL that only :mod:`venturi_sa.testing` runs, in the test's own session and transaction.

Nothing here commits.  The worker never calls these statements; they read
the jobs a test enqueued, undo a claim a test drain took but did not run,
make scheduled jobs visible for ``drain(with_scheduled=True)``, and purge a
queue's rows for suites that commit.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql
from sqlalchemy.orm import Session

from venturi_sa.models import JobBase, Models
from venturi_sa.states import Status
from venturi_sa.storage.params import Fence, Runner


def pending_jobs(models: Models, session: Session, kinds: Sequence[str] | None = None) -> list[JobBase]:
    """The queue's ``pending`` jobs visible to ``session`` (its own uncommitted ones too), oldest first.

    The session is flushed first and the rows are reloaded, so the objects show the database's state.
    """
    job = models.Job
    stmt = sa.select(job).where(job.status == Status.PENDING.value)
    if kinds is not None:
        stmt = stmt.where(job.kind.in_(list(kinds)))
    stmt = stmt.order_by(job.created_at, job.id).execution_options(populate_existing=True)
    return list(session.scalars(stmt))


def reload_jobs(models: Models, session: Session, ids: Sequence[str]) -> None:
    """Reload the jobs ``ids`` in ``session`` (``populate_existing``): their objects show the database's state.

    For inline mode: an ``enqueue_async`` caller reads the returned jobs'
    attributes without a lazy load, which an ``AsyncSession`` cannot do.
    """
    if ids:
        job = models.Job
        session.scalars(sa.select(job).where(job.id.in_(list(ids))).execution_options(populate_existing=True)).all()


def unclaim(models: Models, runner: Runner, fences: Sequence[Fence]) -> int:
    """Undo claims exactly (``pending``, no claimant, ``run_count - 1``), fenced like an outcome write.

    For runs a test drain claimed but did not run; writes no journal row.
    """
    if not fences:
        return 0
    table = models.jobs_table
    job = table.c
    held = sa.func.unnest(
        sa.bindparam("ids", [f.job_id for f in fences], type_=postgresql.ARRAY(sa.Text)),
        sa.bindparam("runs", [f.run_count for f in fences], type_=postgresql.ARRAY(sa.Integer)),
        sa.bindparam("by", [f.claimed_by for f in fences], type_=postgresql.ARRAY(sa.Text)),
    ).table_valued("id", "run_count", "claimed_by").render_derived(name="held")
    stmt = (
        sa.update(table)
        .where(job.id == held.c.id, job.run_count == held.c.run_count, job.claimed_by == held.c.claimed_by,
               job.status == Status.CLAIMED.value)
        .values(status=Status.PENDING.value, claimed_by=None, claim_expires_at=None, run_count=job.run_count - 1)
    )
    return int(runner.execute(stmt).rowcount)  # type: ignore[attr-defined]


def reveal_scheduled(models: Models, runner: Runner, kinds: Sequence[str]) -> int:
    """Make never-run pending jobs of ``kinds`` that are scheduled for later visible now.

    Retries and pauses (``run_count > 0``) keep their times: move the test clock for those.
    """
    job = models.jobs_table.c
    stmt = (
        sa.update(models.jobs_table)
        .where(job.status == Status.PENDING.value, job.kind.in_(list(kinds)), job.run_count == 0,
               job.visible_at > sa.func.now())
        .values(visible_at=sa.func.now())
    )
    return int(runner.execute(stmt).rowcount)  # type: ignore[attr-defined]


def purge(models: Models, runner: Runner) -> int:
    """Delete every job of the queue, live and archived (the journal goes by cascade); the count."""
    runner.execute(sa.delete(models.journal_table))
    archived = int(runner.execute(sa.delete(models.archive_table)).rowcount)  # type: ignore[attr-defined]
    return archived + int(runner.execute(sa.delete(models.jobs_table)).rowcount)  # type: ignore[attr-defined]


__all__ = ["pending_jobs", "purge", "reveal_scheduled", "unclaim"]
