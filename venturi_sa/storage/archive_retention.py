"""Retention of the archive: whole days dropped, rows deleted where the cutoff falls, and the dry run's count.

* :func:`drop_partition` takes ``ACCESS EXCLUSIVE`` on the parent for the
  moment of the ``DROP TABLE`` (it blocks reads of the archive until its
  transaction commits), waiting at most ``storage.archive.LOCK_TIMEOUT`` for
  it, under the advisory lock that serializes attaching.
* :func:`delete_batch` locks the rows it deletes (``SKIP LOCKED``).

An archived parent that a job not yet ended names in ``after=`` is kept
(docs/workflows.md): a requeue re-arms its dependents and they read its
result.  Row deletes leave it (the live cleanup's per-row probe of
``_parents_parent``); a dropped day first moves it into today's partition.
Nothing here commits.  A partition is only dropped by a name
:func:`~venturi_sa.storage.archive.partitions` returned.
"""

from __future__ import annotations

from datetime import date, datetime, time, timedelta, timezone
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import ARRAY

from venturi_sa.models import Models
from venturi_sa.storage import dependents
from venturi_sa.storage.archive import ensure_partitions, lock_archive, partitions
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


_LIVE_PARENTS = """
SELECT DISTINCT p.parent_id FROM {parents} AS p JOIN {jobs} AS c ON c.id = p.job_id
WHERE c.status IN ('pending', 'claimed')
"""
_REHOME = """
UPDATE {archive} AS a SET moved_at = now()
WHERE a.id = ANY(CAST(:ids AS text[])) AND a.moved_at >= CAST(:start AS timestamptz)
  AND a.moved_at < CAST(:end AS timestamptz)
RETURNING a.id
"""


def keep_parents(models: Models, runner: Runner, day: date) -> int:
    """Move the archived parents in ``day``'s partition that a job not yet ended waits for (or may read) into
    today's partition, attaching it if it is missing; returns how many moved.

    Read from the live side (the dependency rows of pending and claimed
    jobs), so the day is not scanned; each id is a primary-key probe of the
    day.  Under the caller's lock on the archive; the caller commits.
    """
    n = models.names
    live = _LIVE_PARENTS.format(parents=models.workflow.parents_table.name, jobs=n.jobs)
    ids = list(runner.execute(sa.text(live)).scalars())
    if not ids:
        return 0
    ensure_partitions(models, runner, ahead=0)
    start = datetime.combine(day, time(0), timezone.utc)
    rehome = sa.text(_REHOME.format(archive=n.archive)).bindparams(sa.bindparam("ids", type_=ARRAY(sa.Text)))
    return len(runner.execute(rehome, {"ids": ids, "start": start, "end": start + timedelta(days=1)}).all())


def drop_partition(models: Models, runner: Runner, name: str) -> int:
    """Count then drop one partition (a name :func:`partitions` returned); returns the jobs it held.

    Its archived parents still named by a job not yet ended are first moved
    into today's partition (:func:`keep_parents`) and are not counted.
    ``DROP TABLE`` takes ``ACCESS EXCLUSIVE`` on the archive until the
    caller commits; a lock not granted within ``LOCK_TIMEOUT`` raises (the
    partition stays, for the next cleanup).  On rollback nothing is dropped
    and nothing moved.
    """
    days = {table: day for day, table in partitions(models, runner).items()}
    if name not in days:
        raise ValueError(f"{name!r} is not a partition of {models.names.archive}")
    lock_archive(models, runner)
    keep_parents(models, runner, days[name])
    held = int(runner.execute(sa.text(f"SELECT count(*) FROM {name}")).scalar_one())
    runner.execute(sa.text(f"DROP TABLE {name}"))
    return held


def _where(models: Models, params: CleanupParams) -> list[Any]:
    archive = models.archive_table
    clauses: list[Any] = [archive.c.finished_at < params.cutoff,
                          dependents.no_live_dependent(models, archive.c.id)]  # a parent stays while they wait
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

