"""Retention of the archive: whole days dropped, rows deleted where the cutoff falls, and the dry run's count.

* :func:`drop_partition` takes ``ACCESS EXCLUSIVE`` on the parent for the
  moment of the ``DROP TABLE`` (it blocks reads of the archive until its
  transaction commits), waiting at most ``storage.archive.LOCK_TIMEOUT`` for
  it, under the advisory lock that serializes attaching.
* :func:`delete_batch` locks the rows it deletes (``SKIP LOCKED``).

Nothing here commits.  A partition is only dropped by a name
:func:`~venturi_sa.storage.archive.partitions` returned.
"""

from __future__ import annotations

from datetime import datetime, time, timedelta, timezone
from typing import Any

import sqlalchemy as sa

from venturi_sa.models import Models
from venturi_sa.storage.archive import lock_archive, partitions
from venturi_sa.storage.cleanup import CleanupParams
from venturi_sa.storage.params import Runner


def droppable(models: Models, runner: Runner, cutoff: datetime) -> list[str]:
    """Partitions whose whole day ends at or before ``cutoff``: every job in them finished before it.

    A job is archived after it finished, so ``finished_at < moved_at <
    the day's end <= cutoff``.  Oldest first.
    """
    days = partitions(models, runner)
    return [days[day] for day in sorted(days)
            if datetime.combine(day + timedelta(days=1), time(0), timezone.utc) <= cutoff]


def drop_partition(models: Models, runner: Runner, name: str) -> int:
    """Count then drop one partition (a name :func:`partitions` returned); returns the jobs it held.

    ``DROP TABLE`` takes ``ACCESS EXCLUSIVE`` on the archive until the
    caller commits; a lock not granted within ``LOCK_TIMEOUT`` raises (the
    partition stays, for the next cleanup).  On rollback nothing is dropped.
    """
    if name not in partitions(models, runner).values():
        raise ValueError(f"{name!r} is not a partition of {models.names.archive}")
    lock_archive(models, runner)
    held = int(runner.execute(sa.text(f"SELECT count(*) FROM {name}")).scalar_one())
    runner.execute(sa.text(f"DROP TABLE {name}"))
    return held


def _where(models: Models, params: CleanupParams) -> list[Any]:
    archive = models.archive_table
    clauses: list[Any] = [archive.c.finished_at < params.cutoff]
    if params.statuses:
        clauses.append(archive.c.status.in_(list(params.statuses)))
    if params.kind is not None:
        clauses.append(archive.c.kind == params.kind)
    if params.floor is not None:
        clauses.append(archive.c.finished_at >= params.floor)
    return clauses


def delete_batch(models: Models, runner: Runner, params: CleanupParams) -> tuple[int, datetime | None]:
    """Delete up to ``batch_size`` archived jobs matching ``params`` (rows locked ``SKIP LOCKED``).

    Returns how many and the newest ``finished_at`` among them (the next
    batch's ``floor``).  The caller commits.
    """
    archive = models.archive_table
    batch = (sa.select(archive.c.id, archive.c.moved_at).where(*_where(models, params))
             .order_by(archive.c.finished_at).limit(params.batch_size).with_for_update(skip_locked=True))
    stmt = (sa.delete(archive)
            .where(sa.tuple_(archive.c.id, archive.c.moved_at).in_(batch))
            .returning(archive.c.finished_at))
    finished = list(runner.execute(stmt).scalars())
    return len(finished), max(finished, default=None)


def count_matching(models: Models, runner: Runner, params: CleanupParams) -> int:
    """How many archived jobs match ``params`` now."""
    stmt = sa.select(sa.func.count()).select_from(models.archive_table).where(*_where(models, params))
    return int(runner.execute(stmt).scalar_one())

