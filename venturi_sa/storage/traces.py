"""Trace contexts (``<prefix>_traces``, migration v8): the enqueue's OpenTelemetry context, one row per job.

Written in the enqueue's transaction right after the jobs it belongs to
(the row references its job, so it commits, rolls back and is deleted with
it: ``ON DELETE CASCADE``); a job a dedup merge returned keeps the context of
the enqueue that created it.  Read once per run by
``venturi_sa.contrib.otel``.  Nothing here commits.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from venturi_sa.models import Models
from venturi_sa.storage.params import Runner


def save_carrier(runner: Runner, models: Models, job_ids: Sequence[str], carrier: dict[str, str]) -> None:
    """Give each of ``job_ids`` the propagation ``carrier`` (``traceparent``, ...), unless it has one already."""
    if not job_ids or not carrier:
        return
    table = models.traces_table
    runner.execute(postgresql.insert(table).values([{"job_id": job_id, "carrier": carrier} for job_id in job_ids])
                   .on_conflict_do_nothing(index_elements=[table.c.job_id]))


def load_carrier(runner: Runner, models: Models, job_id: str) -> dict[str, str] | None:
    """The propagation carrier job ``job_id`` was enqueued with, or None."""
    table = models.traces_table
    carrier = runner.execute(sa.select(table.c.carrier).where(table.c.job_id == job_id)).scalar_one_or_none()
    return carrier if isinstance(carrier, dict) else None
