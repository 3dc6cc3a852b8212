"""Retention cleanup: delete terminal jobs finished before a cutoff, in short batches.

Each batch is its own transaction: a crash or an error leaves the earlier
batches deleted (committed) and the current one rolled back, never half
done, so rerunning the cleanup simply continues.  Only ``completed`` and
``dead`` rows are ever deleted; live rows are never touched.  Journal rows go
with their jobs (``ON DELETE CASCADE``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime, timedelta

import sqlalchemy as sa

from venturi_sa.declarations.limit_rules import MAX_COUNT
from venturi_sa.errors import InvalidOption
from venturi_sa.models import Models
from venturi_sa.ops.archive import cleanup_archive
from venturi_sa.ops.checks import aware, statuses
from venturi_sa.ops.transaction import short_transaction
from venturi_sa.states import TERMINAL
from venturi_sa.storage import archive_retention
from venturi_sa.storage import cleanup as cleanup_store
from venturi_sa.storage.cleanup import CleanupParams, CutoffParams


def cleanup(models: Models, engine: sa.Engine, *, before: datetime | None = None,
            older_than: timedelta | None = None, status: str | Sequence[str] | None = None,
            kind: str | None = None, batch_size: int = 1000, dry_run: bool = False,
            progress: Callable[[int], None] | None = None) -> int:
    """Delete ``completed``/``dead`` jobs finished before the cutoff; returns how many.

    Give exactly one of ``before`` (an aware datetime) or ``older_than``
    (subtracted from the database clock once, at the start).  Deletes in
    batches of ``batch_size``, each batch its own transaction, so no lock is
    held for long; a crash leaves earlier batches deleted and nothing half
    done.  Journal rows go with their jobs.  Rows locked by someone else
    are skipped (a later cleanup catches them).  ``progress(total_so_far)``
    is called after each batch that deleted rows.  ``dry_run`` only counts
    (in one read-only transaction).  Bad arguments raise ``InvalidOption``
    before any SQL runs.  Archived jobs go too: whole day partitions of the
    archive when no status or kind is given, then rows (see
    :func:`venturi_sa.ops.archive.cleanup_archive`).
    """
    chosen = statuses(status, TERMINAL, "cleanup (only terminal statuses may be deleted)")
    if (before is None) == (older_than is None):
        raise InvalidOption("cleanup needs exactly one of before= or older_than=")
    if older_than is not None and (not isinstance(older_than, timedelta) or older_than < timedelta(0)):
        raise InvalidOption(f"older_than must be a non-negative timedelta, got {older_than!r}")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or not 1 <= batch_size <= MAX_COUNT:
        raise InvalidOption(f"cleanup batch_size must be an integer from 1 to {MAX_COUNT}, got {batch_size!r:.80}")
    cutoff = aware("before", before)
    if cutoff is None:
        with short_transaction(models, engine) as session:
            cutoff = cleanup_store.db_cutoff(session, CutoffParams(older_than=older_than or timedelta(0)))
    params = CleanupParams(cutoff=cutoff, statuses=chosen, kind=kind, batch_size=batch_size)
    if dry_run:
        with short_transaction(models, engine) as session:
            return (cleanup_store.count_matching(models, session, params)
                    + archive_retention.count_matching(models, session, params))
    deleted = _delete_in_batches(models, engine, params, progress)
    return deleted + cleanup_archive(models, engine, params, progress, done=deleted)


def _delete_in_batches(models: Models, engine: sa.Engine, params: CleanupParams,
                       progress: Callable[[int], None] | None) -> int:
    """Commit one batch at a time until a batch comes back short; returns the total deleted."""
    total = 0
    while True:
        with short_transaction(models, engine) as session:
            deleted, newest = cleanup_store.delete_batch(models, session, params)
        params = replace(params, floor=newest or params.floor)
        total += deleted
        if deleted and progress is not None:
            progress(total)
        if deleted < params.batch_size:
            return total
