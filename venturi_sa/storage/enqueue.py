"""Enqueue-side SQL, all run in the caller's Session and transaction."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session

from venturi_sa.models import JobBase, Models
from venturi_sa.states import Outcome, Status


def dedup_lock_key(prefix: str, kind: str, key: str) -> int:
    """A stable signed 64-bit advisory-lock key for ``(prefix, kind, key)``.

    Derived from a digest, not ``hash()``, so every process computes the same key.
    """
    digest = hashlib.blake2b(f"{prefix}\0{kind}\0{key}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


def lock_dedup_keys(session: Session, prefix: str, keys: Iterable[tuple[str, str]]) -> None:
    """Take transaction-scoped advisory locks on each ``(kind, key)``, in sorted order.

    Sorted order means two callers taking overlapping keys cannot deadlock.
    The locks are released when the caller commits or rolls back.
    """
    for lock in sorted({dedup_lock_key(prefix, kind, key) for kind, key in keys}):
        session.execute(sa.select(sa.func.pg_advisory_xact_lock(lock)))


def oldest_pending_sibling(models: Models, session: Session, kind: str, key: str) -> JobBase | None:
    """The oldest pending job of ``kind`` with ``dedup_key == key``, locked ``FOR UPDATE``.

    Waits (no SKIP LOCKED) if a worker is claiming it; PostgreSQL then
    re-checks ``status = 'pending'`` on the new row version, so a job that
    was just claimed is never returned.
    """
    job = models.Job
    stmt = (
        sa.select(job)
        .where(job.kind == kind, job.dedup_key == key, job.status == Status.PENDING.value)
        .order_by(job.created_at, job.id)
        .limit(1)
        .with_for_update()
        .execution_options(populate_existing=True)
    )
    return session.execute(stmt).scalars().first()


def journal_merge(models: Models, session: Session, target: JobBase, note: str | None) -> None:
    """Record on ``target`` that it absorbed another enqueue."""
    session.add(
        models.JournalEntry(job_id=target.id, kind=target.kind, run_no=target.run_count,
                            outcome=Outcome.MERGED.value, note=note)
    )


def notify(session: Session, channel: str, kinds: Sequence[str]) -> None:
    """``pg_notify`` once per kind, in the caller's transaction: delivered only on commit."""
    for kind in sorted(set(kinds)):
        session.execute(sa.select(sa.func.pg_notify(channel, kind)))


def notifying_kind(channel: str, kind: str) -> Any:
    """An SQL value for ``kind`` that also sends ``pg_notify(channel, kind)``.

    ``(SELECT kind FROM pg_notify(channel, kind))``: the INSERT of the job
    itself raises the wake-up, so an enqueue costs no extra round trip.  Like
    any NOTIFY it is delivered only if the caller's transaction commits.
    """
    return sa.select(sa.literal(kind, sa.Text)).select_from(sa.func.pg_notify(channel, kind)).scalar_subquery()


def insert_rows(models: Models, session: Session, rows: list[dict[str, Any]]) -> list[JobBase]:
    """ORM bulk ``INSERT ... RETURNING`` of job rows (all with the same keys), in the caller's session.

    Batched by SQLAlchemy's insertmanyvalues; returns the persistent ``Job``
    objects in row order.
    """
    job = models.Job
    result = session.scalars(sa.insert(job).returning(job, sort_by_parameter_order=True), rows)
    return list(result.all())


def insert_jobs(session: Session, jobs: Sequence[JobBase]) -> None:
    """Add ``jobs`` to the session and flush them as batched multi-row INSERTs."""
    session.add_all(jobs)
    session.flush()


__all__ = [
    "dedup_lock_key",
    "insert_jobs",
    "insert_rows",
    "journal_merge",
    "lock_dedup_keys",
    "notify",
    "notifying_kind",
    "oldest_pending_sibling",
]
