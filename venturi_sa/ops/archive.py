"""Archiving terminal jobs, and retention of the archive (see :mod:`venturi_sa.storage.archive`).

:func:`archive` is the operator's call (``queue.archive(engine)``); workers
run the same steps in their maintenance (:mod:`venturi_sa.worker.archiver`).
Each batch is its own transaction: a crash leaves the committed batches
moved and the current one not moved at all, never a job half moved.
:func:`cleanup_archive` is the archive's part of ``queue.cleanup``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta

import sqlalchemy as sa

from venturi_sa.declarations.limit_rules import MAX_COUNT
from venturi_sa.errors import InvalidOption
from venturi_sa.models import Models
from venturi_sa.ops.transaction import short_transaction
from venturi_sa.storage import archive as store
from venturi_sa.storage import archive_retention as retention
from venturi_sa.storage.cleanup import CleanupParams
from venturi_sa.storage.faults import sqlstate

LOCK_NOT_AVAILABLE = "55P03"  # lock_timeout ran out
DEFAULT_ARCHIVE_AFTER = timedelta(minutes=1)
"""How long a terminal job stays in ``<prefix>_jobs`` before workers move it to the archive."""


def check_archive_after(value: object) -> timedelta | None:
    """``value`` if it is None (archiving off) or a non-negative timedelta; else ``InvalidOption``."""
    if value is not None and (not isinstance(value, timedelta) or value < timedelta(0)):
        raise InvalidOption(f"archive_after must be None or a non-negative timedelta, got {value!r}")
    return value


def prepare(models: Models, engine: sa.Engine) -> list[str]:
    """Attach the archive's partitions of today and tomorrow that are missing (one transaction)."""
    with short_transaction(models, engine) as session:
        return store.ensure_partitions(models, session)


def archive(models: Models, engine: sa.Engine, *, older_than: timedelta = timedelta(0), batch_size: int = 1000,
            max_batches: int | None = None, progress: Callable[[int], None] | None = None) -> int:
    """Move terminal jobs finished more than ``older_than`` ago into the archive; returns how many moved.

    Attaches the partitions it needs first, then moves batches of
    ``batch_size`` (each its own transaction, rows locked ``SKIP LOCKED``:
    jobs an operator holds are left for the next pass) until a batch picks
    fewer than ``batch_size`` or moves none from where the last one ended,
    or ``max_batches`` ran.  Jobs with an owed ``on_dead`` call stay until it
    is made, and a dependent whose ended parent stays stays with it (until
    the parent moves).  ``progress(total_so_far)`` is called after each
    batch that moved jobs.
    """
    check_archive_after(older_than)
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or not 1 <= batch_size <= MAX_COUNT:
        raise InvalidOption(f"archive batch_size must be an integer from 1 to {MAX_COUNT}, got {batch_size!r:.80}")
    prepare(models, engine)
    params, total, batches = store.MoveParams(after=older_than, batch_size=batch_size), 0, 0
    while max_batches is None or batches < max_batches:
        with short_transaction(models, engine) as session:
            done = store.move_batch(models, session, params)
        stuck = not done.moved and done.newest == params.floor  # held jobs only, and no further to go
        params = replace(params, floor=done.newest or params.floor)
        total, batches = total + done.moved, batches + 1
        if done.moved and progress is not None:
            progress(total)
        if done.picked < batch_size or stuck:
            break
    return total


def count_archive(models: Models, engine: sa.Engine, params: CleanupParams) -> int:
    """How many archived jobs a cleanup with ``params`` would delete now (its dry run)."""
    with short_transaction(models, engine) as session:
        return retention.count_matching(models, session, params)


def cleanup_archive(models: Models, engine: sa.Engine, params: CleanupParams,
                    progress: Callable[[int], None] | None = None, done: int = 0) -> int:
    """The archive's part of a cleanup; returns how many archived jobs it deleted.

    A cleanup with no status or kind filter drops every partition whose day
    ended by the cutoff (one transaction each, ``ACCESS EXCLUSIVE`` on the
    archive for the drop, waiting at most ``storage.archive.LOCK_TIMEOUT``:
    a partition not dropped then is left for the next cleanup), then
    deletes rows from the partitions that straddle the cutoff, in batches.
    A filtered cleanup only deletes rows.  An archived parent that a pending
    or claimed job names in ``after=`` is kept (a dropped day first moves it
    into today's partition).  ``progress`` gets running totals
    from ``done`` on.
    """
    total = 0
    if not params.statuses and params.kind is None:
        with short_transaction(models, engine) as session:
            names = retention.droppable(models, session, params.cutoff)
        for name in names:
            try:
                with short_transaction(models, engine) as session:
                    total += retention.drop_partition(models, session, name)
            except sa.exc.OperationalError as exc:
                if sqlstate(exc) != LOCK_NOT_AVAILABLE:
                    raise
                continue  # lock_timeout: readers held the archive; the next cleanup drops this day
            if progress is not None:
                progress(done + total)
    while True:
        with short_transaction(models, engine) as session:
            deleted, newest = retention.delete_batch(models, session, params)
        params = replace(params, floor=newest or params.floor)
        total += deleted
        if deleted and progress is not None:
            progress(done + total)
        if deleted < params.batch_size:
            return total
