"""SQL for jobs that reach the database through ``session.add(Job(...))`` instead of ``enqueue``.

Two pieces, built from the same expressions as enqueue's INSERT
(:mod:`venturi_sa.storage.enqueue`): the wake-up ``NOTIFY`` sent inside the
flush that inserted them (so PostgreSQL delivers it only if the caller
commits, and drops it on rollback), and the database-clock times of
:meth:`venturi_sa.Queue.job`.  Nothing here commits.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from venturi_sa.storage import enqueue
from venturi_sa.storage.enqueue import enqueue_time as enqueue_time
from venturi_sa.storage.params import Runner


def notify_kinds(runner: Runner, channel: str, kinds: Sequence[str]) -> None:
    """``pg_notify(channel, kind)`` once per kind, in one statement, in the runner's transaction."""
    runner.execute(sa.select(enqueue.notified(
        sa.bindparam("kinds", sorted(set(kinds)), type_=postgresql.ARRAY(sa.Text)),
        sa.bindparam("channel", channel, type_=sa.Text))))


def literal_visible_time(run_at: datetime | None, delay: timedelta | None) -> Any:
    """:func:`~venturi_sa.storage.enqueue.visible_time` of Python values, bound as literals.

    ``run_at`` if given, else the INSERT's clock plus ``delay`` (or none).
    """
    return enqueue.visible_time(sa.literal(run_at, sa.DateTime(timezone=True)),
                                sa.literal(delay or timedelta(0), sa.Interval))
