"""SQL for jobs that reach the database through ``session.add(Job(...))`` instead of ``enqueue``.

Two pieces: the wake-up ``NOTIFY`` sent inside the flush that inserted them
(so PostgreSQL delivers it only if the caller commits, and drops it on
rollback), and the database-clock times of :meth:`venturi_sa.Queue.job`.
Nothing here commits.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from venturi_sa.storage.params import Runner


def notify_kinds(runner: Runner, channel: str, kinds: Sequence[str]) -> None:
    """``pg_notify(channel, kind)`` once per kind, in one statement, in the runner's transaction."""
    woken = sa.func.unnest(sa.bindparam("kinds", sorted(set(kinds)), type_=postgresql.ARRAY(sa.Text))).alias("k")
    runner.execute(sa.select(sa.func.count()).select_from(woken).join(
        sa.func.pg_notify(sa.bindparam("channel", channel, type_=sa.Text), sa.column("k")).alias("n"), sa.true()))


def enqueue_time() -> Any:
    """The database clock at the INSERT statement (``statement_timestamp()``), as ``enqueue`` uses."""
    return sa.func.statement_timestamp()


def visible_time(delay: timedelta | None, run_at: datetime | None) -> Any:
    """``visible_at`` of a new job: ``run_at``, else the INSERT's clock plus ``delay`` (or none)."""
    if run_at is not None:
        return run_at
    now = sa.func.statement_timestamp()
    return now + sa.literal(delay, sa.Interval) if delay else now
