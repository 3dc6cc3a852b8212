"""The SQL of debounce and throttle at enqueue: when a new or merged job may run.

:func:`hold` runs in the caller's session, after the dedup lock and the
merge writes: each debounced or throttled job's ``visible_at`` becomes the
latest of what it was, the debounce time (min(now + window, ``created_at``
+ max_wait)) and the key's last start + the throttle window.  It commits or
rolls back with the caller.  The other half of a throttle, one start per
window per key at claim time, is :mod:`venturi_sa.storage.throttled_claim`.

Every time is the database clock (``now()``/``statement_timestamp()``, so
the test clock moves them too).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql
from sqlalchemy.orm import Session

from venturi_sa.models import Models
from venturi_sa.states import Status

SECOND: Any = sa.literal_column("interval '1 second'")


@dataclass(frozen=True, kw_only=True)
class HeldJob:
    """One job an enqueue created or merged into, and its kind's policies (None: off)."""

    job_id: str
    window: timedelta | None = None
    max_wait: timedelta | None = None
    throttle: timedelta | None = None


@dataclass(frozen=True, kw_only=True)
class HoldParams:
    jobs: Sequence[HeldJob]


def _seconds(value: timedelta | None) -> float | None:
    return None if value is None else value.total_seconds()


def _floats(name: str, values: list[float | None]) -> Any:
    return sa.bindparam(name, values, type_=postgresql.ARRAY(sa.Float))


def hold(models: Models, session: Session, params: HoldParams) -> dict[str, datetime]:
    """Move each job to the latest of its ``visible_at``, its debounce time and its key's throttle time.

    Only pending jobs are moved; returns the new ``visible_at`` by job id.
    Runs in ``session``'s transaction (the caller commits).
    """
    if not params.jobs:
        return {}
    table, starts = models.jobs_table, models.throttles_table
    job, start = table.c, starts.c
    held = sa.func.unnest(
        sa.bindparam("ids", [j.job_id for j in params.jobs], type_=postgresql.ARRAY(sa.Text)),
        _floats("windows", [_seconds(j.window) for j in params.jobs]),
        _floats("max_waits", [_seconds(j.max_wait) for j in params.jobs]),
        _floats("throttles", [_seconds(j.throttle) for j in params.jobs]),
    ).table_valued("id", "debounce_s", "max_wait_s", "throttle_s").render_derived(name="held")
    # least()/greatest() skip NULLs: a policy that is off (NULL seconds) takes no part.
    debounced = sa.func.least(sa.func.statement_timestamp() + held.c.debounce_s * SECOND,
                              job.created_at + held.c.max_wait_s * SECOND)
    last_start = (sa.select(start.began_at).where(start.kind == job.kind, start["key"] == job.dedup_key)
                  .scalar_subquery())
    throttled = last_start + held.c.throttle_s * SECOND
    stmt = (
        sa.update(table)
        .where(job.id == held.c.id, job.status == Status.PENDING.value)
        .values(visible_at=sa.func.greatest(job.visible_at, debounced, throttled))
        .returning(job.id, job.visible_at)
    )
    return {row[0]: row[1] for row in session.execute(stmt)}


__all__ = ["HeldJob", "HoldParams", "hold"]
