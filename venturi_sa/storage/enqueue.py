"""Enqueue-side SQL, all run in the caller's Session and transaction."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql
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


_BULK_INSERTS: dict[tuple[str, int], Any] = {}


def _text_array(name: str, element: Any) -> Any:
    return sa.cast(sa.bindparam(name, type_=postgresql.ARRAY(sa.Text)), postgresql.ARRAY(element))


def _bulk_insert_statement(models: Models) -> Any:
    """``INSERT ... SELECT FROM unnest(arrays) RETURNING *`` loaded as ``Job`` objects.

    Four array parameters whatever the batch size: the statement text never
    changes, so it is compiled once and each batch is one round trip.
    """
    key = (models.prefix, id(models.Job))
    if key not in _BULK_INSERTS:
        table = models.jobs_table
        rows = sa.func.unnest(
            _text_array("b_ids", sa.Text), _text_array("b_kinds", sa.Text),
            _text_array("b_payloads", postgresql.JSONB), _text_array("b_priorities", sa.SmallInteger),
            _text_array("b_visible", sa.DateTime(timezone=True)),
        ).table_valued("id", "kind", "payload", "priority", "visible_at").render_derived(name="new_job")
        source = sa.select(
            rows.c.id, rows.c.kind, rows.c.payload, rows.c.priority, sa.literal(Status.PENDING.value),
            sa.func.now(), sa.func.coalesce(rows.c.visible_at, sa.func.now()),
        )
        columns = ["id", "kind", "payload", "priority", "status", "created_at", "visible_at"]
        insert = sa.insert(table).from_select(columns, source).returning(*table.c)
        _BULK_INSERTS[key] = sa.select(models.Job).from_statement(insert)
    return _BULK_INSERTS[key]


def insert_rows(models: Models, session: Session, rows: list[dict[str, Any]]) -> list[JobBase]:
    """Insert many plain jobs in one round trip; returns them as ``Job`` objects of ``session``.

    Each row has ``id``, ``kind``, ``payload`` (JSON-ready), ``priority`` and
    optionally ``visible_at`` (an aware datetime); the rest take their
    defaults, with ``created_at``/``visible_at`` from the database clock.
    """
    params = {
        "b_ids": [row["id"] for row in rows],
        "b_kinds": [row["kind"] for row in rows],
        "b_payloads": [json.dumps(row["payload"]) for row in rows],
        "b_priorities": [str(row["priority"]) for row in rows],
        "b_visible": [row["visible_at"].isoformat() if row.get("visible_at") else None for row in rows],
    }
    by_id = {job.id: job for job in session.scalars(_bulk_insert_statement(models), params)}
    return [by_id[row["id"]] for row in rows]


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
