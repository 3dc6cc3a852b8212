"""Enqueue: validate tasks, then add them to the caller's Session.

Enqueue never commits and never opens a connection of its own: the jobs,
any dedup merges and the wake-up ``NOTIFY`` all ride the caller's
transaction.  Commit publishes them; rollback leaves no trace.  Everything is
validated before anything is added, so a bad task leaves the session as it was.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session

from venturi_sa import payloads
from venturi_sa.errors import InvalidOption, UnknownKind
from venturi_sa.models import JobBase, Models, new_job_id
from venturi_sa.outcomes import Coalesce, Independent
from venturi_sa.storage import enqueue as sql
from venturi_sa.task import Registry, Task, check_priority


@dataclass(frozen=True)
class When:
    """When new jobs become eligible: now, after ``delay``, or at ``run_at``."""

    delay: timedelta | None = None
    run_at: datetime | None = None

    @classmethod
    def check(cls, delay: object, run_at: object) -> When:
        if delay is not None and run_at is not None:
            raise InvalidOption("give either delay or run_at, not both")
        if delay is not None and (not isinstance(delay, timedelta) or delay < timedelta(0)):
            raise InvalidOption(f"delay must be a non-negative timedelta, got {delay!r}")
        if run_at is not None:
            if not isinstance(run_at, datetime):
                raise InvalidOption(f"run_at must be a datetime, got {run_at!r}")
            if run_at.tzinfo is None or run_at.utcoffset() is None:
                raise InvalidOption(
                    "run_at must be timezone-aware (e.g. datetime.now(timezone.utc)); "
                    "a naive time would be read in the database session's time zone"
                )
        return cls(delay=delay or None, run_at=run_at)

    def visible_at(self) -> Any:
        if self.run_at is not None:
            return self.run_at
        if self.delay:
            return sa.func.now() + sa.literal(self.delay, sa.Interval)
        return None  # the column default: now(), equal to created_at


@dataclass
class _Prepared:
    task: Task
    payload: Any
    priority: int
    dedup_key: str | None
    job: JobBase | None = None
    merged_into: JobBase | None = None


def _prepare(registry: Registry, task: object, priority: object) -> _Prepared:
    if not isinstance(task, Task):
        raise InvalidOption(f"enqueue takes Task instances, got {type(task).__name__}")
    kind = type(task).kind_name()
    if kind not in registry or registry.get(kind) is not type(task):
        raise UnknownKind(f"task kind {kind!r} is not registered with this queue; add it to Queue(..., tasks=[...])")
    tier = check_priority(type(task).priority if priority is None else priority)
    key = task.dedup_key()
    if key is not None and not isinstance(key, str):
        raise InvalidOption(f"{type(task).__name__}.dedup_key() must return str or None, got {key!r}")
    return _Prepared(task=task, payload=task.stored_payload(), priority=int(tier), dedup_key=key)


def _new_job(models: Models, p: _Prepared, when: When) -> JobBase:
    values: dict[str, Any] = {"id": new_job_id(), "kind": type(p.task).KIND, "payload": p.payload,
                              "priority": p.priority, "dedup_key": p.dedup_key}
    visible = when.visible_at()
    if visible is not None:
        values["visible_at"] = visible
    return models.Job(**values)


def _decide(models: Models, session: Session, prepared: list[_Prepared], when: When) -> None:
    """Find each dedup task's merge target and apply its merge decision (in memory)."""
    newest: dict[tuple[str, str], JobBase] = {}
    for p in prepared:
        kind, key = type(p.task).KIND, p.dedup_key
        assert key is not None
        target = newest.get((kind, key)) or sql.oldest_pending_sibling(models, session, kind, key)
        if target is None:
            p.job = newest[(kind, key)] = _new_job(models, p, when)
            continue
        decision = p.task.merge(target)
        if isinstance(decision, Coalesce):
            schema = type(p.task).payload_schema
            what = f"merged payload of {kind!r}"
            merged = payloads.dump(schema, payloads.load(schema, decision.payload, what), what)
            target.payload = merged
            p.merged_into = p.job = target
        elif isinstance(decision, Independent):
            p.job = _new_job(models, p, when)
        else:
            raise InvalidOption(
                f"{type(p.task).__name__}.merge() must return Coalesce(...) or Independent(), got {decision!r}"
            )


BULK_THRESHOLD = 2


def _insert_bulk(models: Models, session: Session, prepared: list[_Prepared], when: When,
                 notify: bool) -> list[JobBase]:
    """Many plain jobs: one batched ``INSERT ... RETURNING`` and one NOTIFY per kind.

    Uses the ORM's bulk INSERT, which skips the unit of work but still returns
    persistent ``Job`` objects in the caller's session.
    """
    rows = [
        {"id": new_job_id(), "kind": type(p.task).KIND, "payload": p.payload, "priority": p.priority,
         "visible_at": when.run_at} if when.run_at is not None else
        {"id": new_job_id(), "kind": type(p.task).KIND, "payload": p.payload, "priority": p.priority}
        for p in prepared
    ]
    jobs = sql.insert_rows(models, session, rows)
    if notify:
        sql.notify(session, models.names.channel, [row["kind"] for row in rows])
    return jobs


def _wake_workers(models: Models, new_jobs: list[JobBase]) -> None:
    """Let the first new job of each kind carry that kind's NOTIFY in its INSERT."""
    seen: set[str] = set()
    for job in new_jobs:
        kind = job.kind
        if kind not in seen:
            seen.add(kind)
            job.kind = sql.notifying_kind(models.names.channel, kind)


def enqueue_many(
    models: Models,
    registry: Registry,
    session: Session,
    tasks: Sequence[Task],
    *,
    priority: int | None = None,
    delay: timedelta | None = None,
    run_at: datetime | None = None,
    notify: bool = True,
) -> list[JobBase]:
    """Add ``tasks`` to ``session`` as jobs and flush; return the job of each task.

    A task whose dedup key matches a pending job may be coalesced into it (the
    returned job is then that existing job).  Nothing is committed: the
    caller's commit publishes the jobs and wakes workers; rollback discards
    them.  Raises ``InvalidPayload``/``InvalidOption``/``UnknownKind`` with
    nothing added to the session.
    """
    when = When.check(delay, run_at)
    prepared = [_prepare(registry, t, priority) for t in tasks]
    if not prepared:
        return []
    if len(prepared) >= BULK_THRESHOLD and not when.delay and all(p.dedup_key is None for p in prepared):
        return _insert_bulk(models, session, prepared, when, notify)
    dedup = [p for p in prepared if p.dedup_key is not None]
    if dedup:
        sql.lock_dedup_keys(session, models.prefix, [(type(p.task).KIND, p.dedup_key or "") for p in dedup])
        _decide(models, session, dedup, when)
    for p in prepared:
        if p.job is None:
            p.job = _new_job(models, p, when)
    new_jobs = list({id(p.job): p.job for p in prepared if p.merged_into is None and p.job is not None}.values())
    if notify:
        _wake_workers(models, new_jobs)
    sql.insert_jobs(session, new_jobs)
    merged = [p for p in prepared if p.merged_into is not None]
    for p in merged:
        assert p.merged_into is not None
        sql.journal_merge(models, session, p.merged_into,
                          f"absorbed an enqueue of {type(p.task).KIND!r} with dedup key {p.dedup_key!r}")
    if merged:
        session.flush()
    return [p.job for p in prepared if p.job is not None]
