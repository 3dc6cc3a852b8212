"""Owed ``on_dead`` calls (``<prefix>_on_dead``, migration v7): taken, settled or deferred.

A row is written in the transaction that made its job ``dead`` where the
task's code was not at hand (a lease recovery, a cancel found undelivered at
a retry or release, an operator action).  Whoever has the task's code takes
rows with ``FOR UPDATE SKIP LOCKED`` (two takers never make the same call),
deletes each in the transaction that runs its hook, or defers it.  The
writer cannot always tell whether the task declares ``on_dead`` (a
dependent killed by its parent's outcome, an operator without the code):
a worker whose task of the kind has none deletes its rows
(:func:`discard`), so the job can be archived.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import sqlalchemy as sa

from venturi_sa.models import Models
from venturi_sa.storage.params import Runner


def take(models: Models, runner: Runner, *, kinds: Sequence[str] = (), job_ids: Sequence[str] = (),
         limit: int = 50) -> list[sa.Row[Any]]:
    """Lock and return due owed calls of ``kinds`` (or of ``job_ids``), oldest first, with their job's row.

    Each row has the call's ``id``, ``job_id``, ``kind``, ``run_no``,
    ``note``, ``attempts`` and the job's ``payload``, ``carry``,
    ``failure_count``.  Rows locked by another taker are skipped.
    """
    owed, job = models.on_dead_table.c, models.jobs_table.c
    which = owed.job_id.in_(list(job_ids)) if job_ids else owed.kind.in_(list(kinds))
    return list(runner.execute(  # type: ignore[arg-type]
        sa.select(owed.id, owed.job_id, owed.kind, owed.run_no, owed.note, owed.attempts,
                  job.payload, job.carry, job.failure_count)
        .join(models.jobs_table, job.id == owed.job_id)
        .where(which, owed.not_before <= sa.func.now())
        .order_by(owed.id).limit(limit)
        .with_for_update(of=models.on_dead_table, skip_locked=True)
    ).all())


def settle(models: Models, runner: Runner, call_id: int) -> None:
    """Delete owed call ``call_id``: made (its transaction commits with this)."""
    owed = models.on_dead_table
    runner.execute(sa.delete(owed).where(owed.c.id == call_id))


def defer(models: Models, runner: Runner, call_id: int, error: str, wait: timedelta) -> None:
    """Count a failed attempt of owed call ``call_id``; it is due again after ``wait``."""
    owed = models.on_dead_table
    runner.execute(sa.update(owed).where(owed.c.id == call_id).values(
        attempts=owed.c.attempts + 1, last_error=error, not_before=sa.func.now() + wait))


def discard(models: Models, runner: Runner, kinds: Sequence[str]) -> int:
    """Delete every owed call of ``kinds`` (kinds whose task declares no ``on_dead``: no call is owed); how many.

    Rows another transaction holds are skipped (left for the next pass).
    The caller commits; on rollback the rows stay.
    """
    if not kinds:
        return 0
    owed = models.on_dead_table
    held = (sa.select(owed.c.id).where(owed.c.kind.in_(list(kinds)))
            .with_for_update(skip_locked=True).scalar_subquery())
    return len(runner.execute(sa.delete(owed).where(owed.c.id == sa.any_(sa.func.ARRAY(held)))
                              .returning(owed.c.id)).all())
