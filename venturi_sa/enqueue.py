"""Enqueue: validate tasks, decide every merge, then write to the caller's Session.

Enqueue never commits and never opens a connection of its own: the jobs,
any dedup merges and the wake-up ``NOTIFY`` all ride the caller's
transaction.  Commit publishes them; rollback leaves no trace.  An enqueue
call works in two phases: it first validates every task and decides every
merge in memory (reading merge targets but changing nothing), and only then
writes.  So a bad task, a failing ``merge()`` or a merged payload that fails
its schema raises with the session as it was.  All SQL goes through the
storage package (:mod:`venturi_sa.storage.enqueue`, :mod:`~venturi_sa.storage.timeouts`).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, cast

import sqlalchemy as sa
from sqlalchemy.orm import Session

from venturi_sa import limit_keying, merging, payloads
from venturi_sa.declarations.merge_rules import Coalesce, Independent
from venturi_sa.declarations.time_checks import check_delay, check_run_at, check_timeout
from venturi_sa.errors import InvalidOption, UnknownKind
from venturi_sa.models import JobBase, Models, new_job_id, new_job_ids
from venturi_sa.storage import enqueue as stored
from venturi_sa.storage import timeouts
from venturi_sa.storage.enqueue import (
    DedupLockParams,
    InsertParams,
    MergeTargetParams,
    MergeWrite,
    NewJob,
    NewJobColumns,
    RecordMergesParams,
)
from venturi_sa.storage.session_adds import enqueue_time, literal_visible_time
from venturi_sa.storage.timeouts import TimeoutsParams
from venturi_sa.task import Registry, Task, check_priority


@dataclass(frozen=True)
class When:
    """When new jobs become eligible: at the enqueue call, ``delay`` after it, or at ``run_at``."""

    delay: timedelta | None = None
    run_at: datetime | None = None

    @classmethod
    def check(cls, delay: object, run_at: object) -> When:
        """Both checked (:func:`check_delay`, :func:`check_run_at`); ``InvalidOption`` naming the bad one."""
        if delay is not None and run_at is not None:
            raise InvalidOption("give either delay or run_at, not both")
        return cls(delay=check_delay(delay) or None, run_at=check_run_at(run_at))


@dataclass(slots=True)
class _Prepared:
    """One validated task and, once decided, the id of the job it ends up in."""

    task: Task
    kind: str
    payload: Any
    priority: int
    dedup_key: str | None
    job_id: str = field(default_factory=new_job_id)
    absorbed: bool = False  # coalesced into its key's target: no row of its own


def _checked_type(registry: Registry, task: object) -> type[Task]:
    if not isinstance(task, Task):
        raise InvalidOption(f"enqueue takes Task instances, got {type(task).__name__}")
    kind = type(task).kind_name()
    if kind not in registry or registry.get(kind) is not type(task):
        raise UnknownKind(f"task kind {kind!r} is not registered with this queue; add it to Queue(..., tasks=[...])")
    return type(task)


MAX_DEDUP_KEY_BYTES = 512
"""The longest dedup key, in UTF-8 bytes (it is indexed with the kind, and btree entries are bounded)."""


def _checked_key(task: Task) -> str | None:
    key = task.dedup_key()
    if key is None:
        return None
    name = f"{type(task).__name__}.dedup_key()"
    if not isinstance(key, str):
        raise InvalidOption(f"{name} must return str or None, got {type(key).__name__}")
    if "\x00" in key:
        raise InvalidOption(f"{name} contains a NUL character (\\u0000), which PostgreSQL text cannot store")
    if len(key) > MAX_DEDUP_KEY_BYTES:
        raise InvalidOption(f"{name} is {len(key):,} characters, over the {MAX_DEDUP_KEY_BYTES}-byte bound")
    try:
        size = len(key.encode())
    except UnicodeEncodeError as exc:
        raise InvalidOption(f"{name} contains a lone surrogate at character {exc.start}, "
                            "which is not valid Unicode") from None
    if size > MAX_DEDUP_KEY_BYTES:
        raise InvalidOption(f"{name} is {size:,} bytes in UTF-8, over the {MAX_DEDUP_KEY_BYTES}-byte bound")
    return key


def _prepare_many(registry: Registry, tasks: Sequence[Task], priority: object, max_bytes: int) -> list[_Prepared]:
    """Every task checked (its type registered, its priority, payload and dedup key) and prepared, in order.

    The kind and priority are checked once per type, and the payloads of a
    type that keeps :meth:`Task.stored_payload` are dumped together
    (:func:`payloads.dump_many`); ``dedup_key()`` is only called on types
    that override it.  The ids come from one :func:`new_job_ids` call.
    """
    groups: dict[type, list[int]] = {}
    for index, task in enumerate(tasks):
        groups.setdefault(type(task), []).append(index)
    ids = new_job_ids(len(tasks))
    prepared: list[_Prepared | None] = [None] * len(tasks)
    for indexes in groups.values():
        task_type = _checked_type(registry, tasks[indexes[0]])
        members = [tasks[i] for i in indexes]
        tier = int(check_priority(task_type.priority if priority is None else priority))
        what = f"payload of {task_type.kind_name()!r}"
        if task_type.stored_payload is Task.stored_payload:
            stored = payloads.dump_many(task_type.payload_schema, [t.payload for t in members], what, max_bytes)
        else:
            stored = [payloads.ensure_json(t.stored_payload(), what, max_bytes) for t in members]
        keyed = task_type.dedup_key is not Task.dedup_key
        for i, task, payload in zip(indexes, members, stored, strict=True):
            prepared[i] = _Prepared(task=task, kind=task_type.KIND, payload=payload, priority=tier,
                                    dedup_key=_checked_key(task) if keyed else None, job_id=ids[i])
    return cast(list[_Prepared], prepared)  # every index was filled


@dataclass
class _Sibling:
    """The merge target of one ``(kind, key)`` during the decision phase.

    ``existing`` is a pending row found in the database; otherwise ``new``
    is the first new job of this call with that key.  ``payload`` is the
    target's payload after the merges decided so far (nothing is written yet).
    """

    existing: JobBase | None = None
    new: _Prepared | None = None
    payload: Any = None
    notes: list[str] = field(default_factory=list)

    @property
    def target_id(self) -> str:
        if self.existing is not None:
            return self.existing.id
        assert self.new is not None
        return self.new.job_id

    def view(self, models: Models) -> JobBase:
        """A detached stand-in for the target, carrying the payload merged so far.

        ``merge()`` may read (or even mutate) it without touching the session.
        """
        if self.existing is not None:
            columns = {a.key: getattr(self.existing, a.key) for a in sa.inspect(models.Job).column_attrs}
        else:
            assert self.new is not None
            columns = {"id": self.new.job_id, "kind": self.new.kind, "priority": self.new.priority,
                       "dedup_key": self.new.dedup_key, "status": "pending", "run_count": 0, "failure_count": 0,
                       "carry": None}
        return models.Job(**{**columns, "payload": copy.deepcopy(self.payload)})


def _merged_payload(p: _Prepared, decision: object, max_bytes: int) -> Any | None:
    """The validated merged payload of a ``Coalesce``, or None for ``Independent``."""
    if isinstance(decision, Coalesce):
        schema = type(p.task).payload_schema
        what = f"merged payload of {p.kind!r}"
        return payloads.dump(schema, payloads.load(schema, decision.payload, what), what, max_bytes)
    if isinstance(decision, Independent):
        return None
    raise InvalidOption(
        f"{type(p.task).__name__}.merge() must return Coalesce(...) or Independent(), got {decision!r}"
    )


def _decide(models: Models, session: Session, prepared: list[_Prepared], max_bytes: int) -> dict[
        tuple[str, str], _Sibling]:
    """Lock the dedup keys, find each key's target and decide every merge, writing nothing.

    Later tasks of a key see the payload the earlier ones merged.
    """
    keys = [(p.kind, p.dedup_key) for p in prepared if p.dedup_key is not None]
    stored.lock_dedup_keys(models, session, DedupLockParams(keys=keys))
    session.flush()  # this session's own unflushed jobs must be visible to the lookup
    siblings: dict[tuple[str, str], _Sibling] = {}
    for p in prepared:
        if p.dedup_key is None:
            continue
        key = (p.kind, p.dedup_key)
        if key not in siblings:
            target = stored.oldest_pending_sibling(models, session,
                                                   MergeTargetParams(kind=p.kind, dedup_key=p.dedup_key))
            siblings[key] = _Sibling(existing=target, payload=target.payload if target is not None else None)
        sibling = siblings[key]
        if sibling.existing is None and sibling.new is None:
            sibling.new, sibling.payload = p, p.payload
            continue
        merged = _merged_payload(p, merging.decide(p.task, p.payload, sibling.view(models), Task.merge),
                                 max_bytes)
        if merged is None:
            continue
        sibling.payload = merged
        sibling.notes.append(f"absorbed an enqueue of {p.kind!r} with dedup key {p.dedup_key!r}")
        p.job_id, p.absorbed = sibling.target_id, True
    return siblings


@dataclass(frozen=True)
class Call:
    """One enqueue call, validated (:func:`prepared`): its tasks, when they become eligible, their own limit.

    Built before anything is read or written; use it for one write only
    (the dedup decision fills in each task's job id).
    """

    tasks: list[_Prepared]
    when: When
    limit: timedelta | None
    notify: bool
    max_bytes: int = payloads.DEFAULT_MAX_PAYLOAD_BYTES


def prepared(registry: Registry, tasks: Sequence[Task], *, priority: object = None, delay: object = None,
             run_at: object = None, timeout: object = None, notify: bool = True,
             max_bytes: int = payloads.DEFAULT_MAX_PAYLOAD_BYTES) -> Call:
    """Validate an enqueue call's options and every task, touching no session.

    Raises ``InvalidPayload``/``InvalidOption``/``UnknownKind``; the write
    (:func:`enqueue_many` or :func:`enqueue_ids`) then has nothing left to refuse
    but what needs the database (a dedup task's isolation, its ``merge()``).
    ``timeout`` (a positive timedelta) becomes the new jobs' own time limit,
    overriding their task's ``timeout``; ``delay`` counts from the write, on
    the database clock.  Each stored payload must fit ``max_bytes`` of JSON
    (the bounds are in docs/tasks.md, "Bounds on what enqueue accepts").
    """
    call = Call(when=When.check(delay, run_at), limit=check_timeout(timeout),
                tasks=_prepare_many(registry, tasks, priority, max_bytes), notify=notify, max_bytes=max_bytes)
    limit_keying.check_new(call.tasks)  # a bad limit_key() raises here, before anything is written
    return call


def enqueue_many(models: Models, session: Session, call: Call) -> list[JobBase]:
    """Add ``call``'s tasks to ``session`` as jobs and flush; return the job of each task.

    A task whose dedup key matches a pending job may be coalesced into it (the
    returned job is then that existing job, whose time limit stays as it was).
    Nothing is committed: the caller's commit publishes the jobs and wakes
    workers; rollback discards them.  A dedup task outside READ COMMITTED
    raises ``UnsupportedIsolation``, and a failing ``merge()`` (or a merged
    payload its schema refuses) raises, with nothing added to or changed in
    the session.
    """
    if not call.tasks:
        return []
    deduplicated = any(p.dedup_key is not None for p in call.tasks)
    siblings = _decide(models, session, call.tasks, call.max_bytes) if deduplicated else {}
    jobs = _write(models, session, call.tasks, siblings, call.when, call.notify)
    if deduplicated:  # debounce and throttle move the jobs they created or merged into (merging)
        merging.hold(models, session, [(type(p.task), p.dedup_key, j)
                                              for p, j in zip(call.tasks, jobs, strict=True)])
    _limit(models, session, call)
    limit_keying.store_new(models, session, call.tasks, {s.target_id: s.payload for s in siblings.values() if s.notes})
    return jobs


def _limit(models: Models, session: Session, call: Call) -> None:
    """Store the enqueue's ``timeout=`` for the jobs just inserted (after them: each row references its job)."""
    if call.limit is not None:
        timeouts.set_timeouts(models, session, TimeoutsParams(
            job_ids=[p.job_id for p in call.tasks if not p.absorbed], timeout=call.limit))


def enqueue_ids(models: Models, session: Session, call: Call) -> list[str]:
    """:func:`enqueue_many` returning only the job ids: one ``INSERT`` on the session's connection.

    No ``Job`` object is built or added to the session, and the session is
    not flushed; the rows (and their ``NOTIFY``) are in the session's
    transaction, so commit publishes them and rollback discards them.  If
    any task has a dedup key, the whole call takes :func:`enqueue_many`'s
    path (the same advisory locks and merges; its jobs are then in the
    session) and returns their ids, an absorbed task's being its target's.
    """
    if any(p.dedup_key is not None for p in call.tasks):
        return [job.id for job in enqueue_many(models, session, call)]
    if not call.tasks:
        return []
    tasks = call.tasks
    rows = NewJobColumns(ids=[p.job_id for p in tasks], kinds=[p.kind for p in tasks],
                         payloads=[p.payload for p in tasks], priorities=[p.priority for p in tasks],
                         dedup_keys=[None] * len(tasks))
    stored.insert_rows(models, session, InsertParams(jobs=rows, delay=call.when.delay, run_at=call.when.run_at,
                                              notify_channel=models.names.channel if call.notify else None))
    _limit(models, session, call)
    limit_keying.store_new(models, session, call.tasks, {})
    return list(rows.ids)


def _write(models: Models, session: Session, prepared: list[_Prepared],
           siblings: dict[tuple[str, str], _Sibling], when: When, notify: bool) -> list[JobBase]:
    """Apply what :func:`_decide` decided: insert the new jobs, then record the merges."""
    final = {s.new.job_id: s.payload for s in siblings.values() if s.new is not None}
    fresh = [NewJob(id=p.job_id, kind=p.kind, payload=final.get(p.job_id, p.payload), priority=p.priority,
                    dedup_key=p.dedup_key)
             for p in prepared if not p.absorbed]
    jobs: dict[str, JobBase] = {}
    if fresh:
        params = InsertParams(jobs=fresh, delay=when.delay, run_at=when.run_at,
                              notify_channel=models.names.channel if notify else None)
        jobs = {job.id: job for job in stored.insert_jobs(models, session, params)}
    writes = []
    for s in siblings.values():
        target = jobs.setdefault(s.target_id, s.existing) if s.existing is not None else jobs[s.target_id]
        if s.notes:
            writes.append(MergeWrite(target=target, payload=s.payload, notes=tuple(s.notes)))
    if writes:
        stored.record_merges(models, session, RecordMergesParams(merges=writes))
    return [jobs[p.job_id] for p in prepared]



def build_job(models: Models, registry: Registry, task: Task, *, priority: object = None, delay: object = None,
              run_at: object = None, timeout: object = None,
              max_bytes: int = payloads.DEFAULT_MAX_PAYLOAD_BYTES) -> JobBase:
    """An unsaved, validated ``Job`` for ``task``, for the caller to ``session.add``; touches no session.

    Validated by :func:`prepared`, as every enqueue is (kind, payload,
    priority, delay/run_at, timeout); a ``timeout`` rides along as the job's
    ``time_limit`` row, inserted by the same flush.  Its times come from the
    database clock at its INSERT.  A task with a dedup key is refused: its
    merge needs the session, so it must go through ``queue.enqueue``.
    """
    call = prepared(registry, [task], priority=priority, delay=delay, run_at=run_at, timeout=timeout,
                    max_bytes=max_bytes)
    [p], when, limit = call.tasks, call.when, call.limit
    if p.dedup_key is not None:
        raise InvalidOption(
            f"{type(task).__name__} has a dedup key ({p.dedup_key!r}): its merge with a pending sibling needs "
            "the session, so use queue.enqueue(session, task) instead of queue.job(...)"
        )
    job = models.Job(id=p.job_id, kind=p.kind, payload=p.payload, priority=p.priority,
                     status="pending", run_count=0, failure_count=0, created_at=enqueue_time(),
                     visible_at=literal_visible_time(when.run_at, when.delay))
    if limit is not None:
        job.time_limit = models.JobTimeout(timeout=limit)
    return job
