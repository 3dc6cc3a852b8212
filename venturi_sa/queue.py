"""The queue: one prefix's mapped classes plus the registry of its task types.

Every call has a sync form taking a ``Session`` (enqueue) or an ``Engine``
(operations) and an ``*_async`` twin taking an ``AsyncSession`` or an
``AsyncEngine``.  The twins run the very same code through SQLAlchemy's
greenlet bridge (``AsyncSession.run_sync`` and ``AsyncEngine.sync_engine``
inside ``greenlet_spawn``), so their guarantees are the sync ones word for
word.  A sync object passed to an async call, or the reverse, raises
``TypeError`` naming the call to use (see :mod:`venturi_sa.binds`).
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal, TypeVar, overload

from marshmallow import Schema
from sqlalchemy import Engine
from sqlalchemy.orm import Session
from sqlalchemy.util import greenlet_spawn

from venturi_sa import added_jobs, payloads
from venturi_sa import enqueue as enqueueing
from venturi_sa.binds import (
    is_async_session,
    require_async_engine,
    require_async_session,
    require_engine,
    require_session,
)
from venturi_sa.models import JobBase, Models
from venturi_sa.ops import admin, cleanup, history, stats
from venturi_sa.ops import archive as archive_ops
from venturi_sa.ops import control as runtime
from venturi_sa.ops.control import Cancelled, PauseInfo
from venturi_sa.ops.explain import Explanation, explain
from venturi_sa.ops.records import JobInfo, JobView, JournalInfo, Page, Stats
from venturi_sa.periodic import declare as periodic
from venturi_sa.task import EmptyPayload, Handler, Registry, Task, check_policy_keys, task

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

    from venturi_sa.worker.hooks import RunHooks

T = TypeVar("T")


async def _on_sync_engine(engine: AsyncEngine, call: str, fn: Callable[[Engine], T]) -> T:
    """``fn(engine.sync_engine)`` in a greenlet, so the sync operation drives the async driver."""
    sync_engine = require_async_engine(engine, call).sync_engine
    return await greenlet_spawn(fn, sync_engine)

EnqueueHook = Callable[[Session, list[JobBase]], None]


def _session_class_of(models: Models) -> type[Session]:
    """``sqlmodel.Session`` if ``models`` live in ``SQLModel.metadata``, else ``Session``."""
    sqlmodel = sys.modules.get("sqlmodel")  # models on SQLModel's metadata imply it was imported
    if sqlmodel is not None and models.jobs_table.metadata is sqlmodel.SQLModel.metadata:
        cls: type[Session] = sqlmodel.Session
        return cls
    return Session


def _no_run_hooks() -> RunHooks:
    from venturi_sa.worker.hooks import NO_HOOKS  # the worker package imports this module

    return NO_HOOKS


class Queue:
    """A queue: ``models`` (from :func:`~venturi_sa.make_models`) and its task types.

    Registering a kind twice raises ``DuplicateKind``.  With ``notify=False``
    enqueues send no ``NOTIFY`` (saving its commit-time cost, a few tenths of
    a millisecond): for deployments whose workers poll (``listen=False``).
    A ``Job`` added to any session directly (``session.add(Job(...))``)
    sends its queue's ``NOTIFY`` in the flush that inserts it (delivered on
    commit) unless every queue of its models has ``notify=False``.  With
    ``check_added_jobs=True`` such a job is also checked at flush, raising
    the errors enqueue raises (an unknown kind, a payload failing its
    schema) before anything is written.  ``max_payload_bytes`` (default 1 MiB)
    bounds the JSON of each payload, carry, checkpoint, attachment and
    result (``InvalidPayload`` naming the size; docs/tasks.md lists every bound).
    ``archive_after`` (default one minute) is how long a ``completed`` or
    ``dead`` job stays in ``<prefix>_jobs`` before the queue's workers move
    it, with its journal, to the archive (``<prefix>_archive``, migration
    v9; reads cover both); None keeps terminal jobs in ``<prefix>_jobs``
    until cleanup, as before v9.
    """

    def __init__(self, models: Models, tasks: Iterable[type[Task]] = (), *, notify: bool = True,
                 check_added_jobs: bool = False,
                 max_payload_bytes: int = payloads.DEFAULT_MAX_PAYLOAD_BYTES,
                 session_class: type[Session] | None = None,
                 archive_after: timedelta | None = archive_ops.DEFAULT_ARCHIVE_AFTER) -> None:
        self.archive_after = archive_ops.check_archive_after(archive_after)
        """How long a terminal job stays in ``<prefix>_jobs`` before workers move it to the archive (None: never)."""
        self.max_payload_bytes = payloads.check_max_bytes(max_payload_bytes)
        """The largest JSON (in bytes) this queue stores as a payload, carry, checkpoint, attachment or result."""
        self.models = models
        self.session_class: type[Session] = session_class or _session_class_of(models)
        """The class of a handler's ``ctx.session`` in every runner (workers, ``drain``, the plugin).

        Default: ``sqlmodel.Session`` for models made on ``SQLModel``'s
        metadata (``make_models(prefix, SQLModel)``), else ``Session``.
        """
        self.registry = Registry(tuple(tasks))
        self.schedules = periodic.ScheduleSet(self.registry)
        """The declared schedules (``schedule = ...`` on task types, and :meth:`schedule`)."""
        for task_type in self.registry:
            self.schedules.add_task_type(task_type)
        self.notify = notify
        self.check_added_jobs = check_added_jobs
        added_jobs.register(self)
        self.enqueue_hooks: list[EnqueueHook] = []
        """Each is called as ``hook(session, jobs)`` after an enqueue flushed its jobs, before it returns.

        Empty unless a test switches on ``venturi_sa.testing.inline(queue)`` or
        ``venturi_sa.contrib.otel.instrument(queue)`` added its own.
        """
        self.run_hooks = _no_run_hooks()
        """The queue's own ``around_run``/``on_outcome`` hooks (:mod:`venturi_sa.worker.hooks`), run by every runner."""

    @property
    def prefix(self) -> str:
        return self.models.prefix

    def register(self, task_type: type[Task]) -> type[Task]:
        """Add a task type (usable as a class decorator), with the schedules it declares."""
        declared = periodic.from_task_type(task_type)  # validated before anything is registered
        registered = self.registry.register(task_type)
        for schedule in declared:
            self.schedules.add(schedule)
        return registered

    def schedule(self, task: Task, *, cron: str | None = None, every: timedelta | None = None,
                 tz: str | None = None, name: str | None = None, catch_up: str = "latest",
                 overlap: str = "allow", priority: int | None = None) -> periodic.Schedule:
        """Declare a periodic job: ``task``'s job is inserted once per fire time, across all workers.

        ``cron`` (5 fields, or 6 with seconds first) in ``tz`` (default UTC),
        or ``every`` (a timedelta, absolute time); ``catch_up`` and
        ``overlap`` are the policies of docs/periodic.md.  Validated now
        (``InvalidOption`` naming a bad expression, zone, policy or duplicate
        name; ``UnknownKind``); nothing is written: workers reconcile the
        declared schedules with the database when they start.
        """
        return self.schedules.add(periodic.build(task, cron=cron, every=every, tz=tz, name=name,
                                                 catch_up=catch_up, overlap=overlap, priority=priority))

    def task(self, kind: str, *, payload: type[Schema] = EmptyPayload, carry: type[Schema] | None = None,
             **policy: Any) -> Callable[[Handler], type[Task]]:
        """Decorate ``fn(payload, ctx)`` (plain or ``async def``) into a registered task type.

        See :func:`venturi_sa.task`; an unknown policy key raises ``InvalidOption`` here.
        """
        check_policy_keys(policy, "queue.task")

        def wrap(fn: Handler) -> type[Task]:
            return self.register(task(kind, payload=payload, carry=carry, **policy)(fn))

        return wrap

    def job(self, task: Task, *, priority: int | None = None, delay: timedelta | None = None,
            run_at: datetime | None = None, timeout: timedelta | None = None) -> JobBase:
        """An unsaved, validated ``Job`` for ``task``: ``session.add(queue.job(...))`` enqueues it.

        Validated as :meth:`enqueue` validates, touching no session; the
        flush that inserts it sends the queue's ``NOTIFY`` (delivered on
        commit), and its times are the database clock at that INSERT (a
        ``timeout`` is inserted by the same flush).  A task with a dedup key
        raises ``InvalidOption``: use :meth:`enqueue`, whose merge needs the session.
        """
        return enqueueing.build_job(self.models, self.registry, task, priority=priority, delay=delay,
                                    run_at=run_at, timeout=timeout, max_bytes=self.max_payload_bytes)

    def enqueue(self, session: Session, task: Task, *, priority: int | None = None,
                delay: timedelta | None = None, run_at: datetime | None = None,
                timeout: timedelta | None = None) -> JobBase:
        """Add one job to the caller's ``session`` and flush; never commits.

        Commit publishes the job and wakes idle workers; rollback discards it.
        ``delay`` counts from this call on the database clock.  ``timeout``
        (a positive timedelta) is this job's own time limit, overriding its
        task's ``timeout`` (stored beside it, in ``<prefix>_timeouts``).  A task with a
        dedup key may return an existing pending job instead, and needs a READ
        COMMITTED transaction (``UnsupportedIsolation`` otherwise).  Bad input
        raises with the session as it was.  Read ``job.id`` before the session
        closes.  An ``AsyncSession`` raises ``TypeError``: use :meth:`enqueue_async`.
        """
        return self.enqueue_many(require_session(session, "enqueue"), [task], priority=priority,
                                 delay=delay, run_at=run_at, timeout=timeout)[0]

    @overload
    def enqueue_many(self, session: Session, tasks: Sequence[Task], *, priority: int | None = None,
                     delay: timedelta | None = None, run_at: datetime | None = None,
                     timeout: timedelta | None = None, ids_only: Literal[False] = False) -> list[JobBase]: ...

    @overload
    def enqueue_many(self, session: Session, tasks: Sequence[Task], *, priority: int | None = None,
                     delay: timedelta | None = None, run_at: datetime | None = None,
                     timeout: timedelta | None = None, ids_only: Literal[True]) -> list[str]: ...

    def enqueue_many(self, session: Session, tasks: Sequence[Task], *, priority: int | None = None,
                     delay: timedelta | None = None, run_at: datetime | None = None,
                     timeout: timedelta | None = None, ids_only: bool = False) -> list[JobBase] | list[str]:
        """Add many jobs in one INSERT (which also sends one NOTIFY per kind); never commits.

        Every task is validated and every dedup merge decided before anything
        is written, so one bad task or failing ``merge()`` raises with the
        session as it was.  Commit publishes them all; rollback discards them.
        With ``ids_only=True`` it returns the job ids instead of ``Job``
        objects: the rows are inserted on the session's connection without
        ``RETURNING``, no object is added to the session and nothing is
        flushed (the fast bulk path; the same transaction, commit and rollback
        semantics).  Tasks with a dedup key make that call take the ordinary
        path (same locks and merges) and return its jobs' ids.
        An ``AsyncSession`` raises ``TypeError``: use :meth:`enqueue_many_async`.
        """
        checked = require_session(session, "enqueue_many")
        call = enqueueing.prepared(self.registry, tasks, priority=priority, delay=delay, run_at=run_at,
                                   timeout=timeout, notify=self.notify, max_bytes=self.max_payload_bytes)
        if ids_only and not self.enqueue_hooks:
            return enqueueing.enqueue_ids(self.models, checked, call)
        jobs = enqueueing.enqueue_many(self.models, checked, call)
        for hook in self.enqueue_hooks:
            hook(session, jobs)
        return [job.id for job in jobs] if ids_only else jobs

    async def enqueue_async(self, session: AsyncSession, task: Task, *, priority: int | None = None,
                            delay: timedelta | None = None, run_at: datetime | None = None,
                            timeout: timedelta | None = None) -> JobBase:
        """:meth:`enqueue` in the caller's ``AsyncSession`` (its transaction; never commits).

        Exactly the sync semantics, by the same code run through
        ``AsyncSession.run_sync``: commit publishes the job and wakes idle
        workers, rollback discards it, a dedup task takes the same advisory
        lock and needs READ COMMITTED, and bad input raises with the session
        as it was.  The returned job's columns are loaded: read ``job.id``
        before the session closes (lazy loads would need ``await``).
        """
        checked = require_async_session(session, "enqueue_async")
        return (await self.enqueue_many_async(checked, [task], priority=priority, delay=delay,
                                              run_at=run_at, timeout=timeout))[0]

    @overload
    async def enqueue_many_async(self, session: AsyncSession, tasks: Sequence[Task], *,
                                 priority: int | None = None, delay: timedelta | None = None,
                                 run_at: datetime | None = None, timeout: timedelta | None = None,
                                 ids_only: Literal[False] = False) -> list[JobBase]: ...

    @overload
    async def enqueue_many_async(self, session: AsyncSession, tasks: Sequence[Task], *,
                                 priority: int | None = None, delay: timedelta | None = None,
                                 run_at: datetime | None = None, timeout: timedelta | None = None,
                                 ids_only: Literal[True]) -> list[str]: ...

    async def enqueue_many_async(self, session: AsyncSession, tasks: Sequence[Task], *,
                                 priority: int | None = None, delay: timedelta | None = None,
                                 run_at: datetime | None = None, timeout: timedelta | None = None,
                                 ids_only: bool = False) -> list[JobBase] | list[str]:
        """:meth:`enqueue_many` in the caller's ``AsyncSession``; never commits (same guarantees, ``ids_only`` too)."""
        checked = require_async_session(session, "enqueue_many_async")

        def run(sync: Session) -> list[JobBase] | list[str]:
            if ids_only:
                return self.enqueue_many(sync, tasks, priority=priority, delay=delay, run_at=run_at,
                                         timeout=timeout, ids_only=True)
            return self.enqueue_many(sync, tasks, priority=priority, delay=delay, run_at=run_at, timeout=timeout)

        return await checked.run_sync(run)

    # -- operating the queue: history, stats, retention, admin (venturi_sa/ops/) ---------------
    # Each method opens its own short transaction(s) on ``engine``; never the application's session.

    def get_job(self, engine: Engine, job_id: str) -> JobView:
        """The job's current row with ``fired_by`` and ``timeout`` (a :class:`~venturi_sa.JobView`), one statement.

        ``fired_by`` is the schedule fire that inserted it (None: no schedule
        did), ``timeout`` its own time limit (None: its task's applies).
        Read-only; ``JobNotFound`` if there is no such job.
        """
        return history.get_job(self.models, require_engine(engine, "get_job"), job_id)

    def journal(self, engine: Engine, job_id: str) -> list[JournalInfo]:
        """The job's journal timeline, oldest first; ``JobNotFound`` if the job does not exist."""
        return history.journal(self.models, require_engine(engine, "journal"), job_id)

    def result(self, engine: Engine, job_id: str, *, wait: float | None = None) -> Any:
        """The completed job's result: what its handler returned (its last ``completed`` run's attachment).

        ``JobNotFound`` if there is no such job; ``JobNotCompleted`` (with
        ``.status``) if it is not completed.  With ``wait`` seconds, polls the
        job row (every 50 ms, short read-only transactions) until it completes
        and raises ``TimeoutError`` when the time runs out; a ``dead`` job
        raises ``JobNotCompleted`` at once.
        """
        return history.result(self.models, require_engine(engine, "result"), job_id, wait)

    def history(self, engine: Engine, *, status: str | Sequence[str] | None = None, kind: str | None = None,
                finished_after: datetime | None = None, finished_before: datetime | None = None,
                limit: int = 50, cursor: str | None = None) -> Page:
        """Jobs newest first, keyset-paged by an opaque ``cursor`` (see :func:`venturi_sa.ops.history.history`)."""
        return history.history(self.models, require_engine(engine, "history"), status=status, kind=kind,
                               finished_after=finished_after, finished_before=finished_before,
                               limit=limit, cursor=cursor)

    def stats(self, engine: Engine) -> Stats:
        """Counts by status and kind, eligible vs scheduled, in flight, dead, oldest eligible age."""
        return stats.stats(self.models, require_engine(engine, "stats"))

    def cleanup(self, engine: Engine, *, before: datetime | None = None, older_than: timedelta | None = None,
                status: str | Sequence[str] | None = None, kind: str | None = None, batch_size: int = 1000,
                dry_run: bool = False, progress: Callable[[int], None] | None = None) -> int:
        """Delete terminal jobs finished before the cutoff in short batches; returns the count."""
        return cleanup.cleanup(self.models, require_engine(engine, "cleanup"), before=before, older_than=older_than,
                               status=status, kind=kind, batch_size=batch_size, dry_run=dry_run,
                               progress=progress)

    def archive(self, engine: Engine, *, older_than: timedelta | None = None, batch_size: int = 1000) -> int:
        """Move terminal jobs finished more than ``older_than`` ago (default: ``archive_after``, else 0) to the archive.

        Batches of ``batch_size``, each its own transaction; returns how many
        jobs moved (see :func:`venturi_sa.ops.archive.archive`).
        """
        after = older_than if older_than is not None else self.archive_after or timedelta(0)
        return archive_ops.archive(self.models, require_engine(engine, "archive"), older_than=after,
                                   batch_size=batch_size)

    def requeue(self, engine: Engine, job_id: str, note: str | None = None, *,
                actor: str = runtime.DEFAULT_ACTOR) -> JobInfo:
        """Operator: ``dead`` -> ``pending`` now, with a fresh set of tries; journaled."""
        return admin.requeue(self.models, require_engine(engine, "requeue"), job_id, note, actor)

    def kill(self, engine: Engine, job_id: str, note: str | None = None, *,
             actor: str = runtime.DEFAULT_ACTOR) -> JobInfo:
        """Operator: ``pending`` -> ``dead``; journaled."""
        return admin.kill(self.models, require_engine(engine, "kill"), job_id, note, actor,
                          self.registry)

    def release(self, engine: Engine, job_id: str, note: str | None = None, *,
                actor: str = runtime.DEFAULT_ACTOR) -> JobInfo:
        """Operator: ``claimed`` -> ``pending`` now, no failure counted (its worker is gone); journaled."""
        return admin.release(self.models, require_engine(engine, "release"), job_id, note, actor)

    # -- the same operations on an AsyncEngine: the sync code above, in a greenlet ------------

    async def get_job_async(self, engine: AsyncEngine, job_id: str) -> JobView:
        """:meth:`get_job` on an ``AsyncEngine``."""
        return await _on_sync_engine(engine, "get_job_async", lambda e: history.get_job(self.models, e, job_id))

    async def journal_async(self, engine: AsyncEngine, job_id: str) -> list[JournalInfo]:
        """:meth:`journal` on an ``AsyncEngine``."""
        return await _on_sync_engine(engine, "journal_async", lambda e: history.journal(self.models, e, job_id))

    async def result_async(self, engine: AsyncEngine, job_id: str, *, wait: float | None = None) -> Any:
        """:meth:`result` on an ``AsyncEngine``; waiting sleeps with ``asyncio.sleep``, never blocking the loop."""
        limit = history.check_wait(wait)
        deadline = time.monotonic() + (limit or 0.0)
        while True:
            state = await _on_sync_engine(engine, "result_async",
                                          lambda e: history.result_state(self.models, e, job_id))
            if history.settled(self.models, job_id, state, waiting=limit is not None):
                return state[1]
            left = deadline - time.monotonic()
            if left <= 0:
                raise history.timed_out(self.models, job_id, limit or 0.0, state[0])
            await asyncio.sleep(min(history.RESULT_POLL, left))

    async def history_async(self, engine: AsyncEngine, *, status: str | Sequence[str] | None = None,
                            kind: str | None = None, finished_after: datetime | None = None,
                            finished_before: datetime | None = None, limit: int = 50,
                            cursor: str | None = None) -> Page:
        """:meth:`history` on an ``AsyncEngine``."""
        return await _on_sync_engine(engine, "history_async", lambda e: history.history(
            self.models, e, status=status, kind=kind, finished_after=finished_after, finished_before=finished_before,
            limit=limit, cursor=cursor))

    async def stats_async(self, engine: AsyncEngine) -> Stats:
        """:meth:`stats` on an ``AsyncEngine``."""
        return await _on_sync_engine(engine, "stats_async", lambda e: stats.stats(self.models, e))

    async def cleanup_async(self, engine: AsyncEngine, *, before: datetime | None = None,
                            older_than: timedelta | None = None, status: str | Sequence[str] | None = None,
                            kind: str | None = None, batch_size: int = 1000, dry_run: bool = False,
                            progress: Callable[[int], None] | None = None) -> int:
        """:meth:`cleanup` on an ``AsyncEngine`` (each batch its own transaction; ``progress`` is sync)."""
        return await _on_sync_engine(engine, "cleanup_async", lambda e: cleanup.cleanup(
            self.models, e, before=before, older_than=older_than, status=status, kind=kind, batch_size=batch_size,
            dry_run=dry_run, progress=progress))

    async def requeue_async(self, engine: AsyncEngine, job_id: str, note: str | None = None) -> JobInfo:
        """:meth:`requeue` on an ``AsyncEngine``."""
        return await _on_sync_engine(engine, "requeue_async", lambda e: admin.requeue(self.models, e, job_id, note))

    async def kill_async(self, engine: AsyncEngine, job_id: str, note: str | None = None) -> JobInfo:
        """:meth:`kill` on an ``AsyncEngine``."""
        return await _on_sync_engine(engine, "kill_async", lambda e: admin.kill(self.models, e, job_id, note,
                                                                                          registry=self.registry))

    async def release_async(self, engine: AsyncEngine, job_id: str, note: str | None = None) -> JobInfo:
        """:meth:`release` on an ``AsyncEngine``."""
        return await _on_sync_engine(engine, "release_async", lambda e: admin.release(self.models, e, job_id, note))

    # -- runtime control: cancel, pause/resume, edit, explain (venturi_sa/ops/control.py, explain.py) ---------

    def cancel(self, bind: Session | Engine, job_id: str, note: str | None = None, *,
               actor: str = runtime.DEFAULT_ACTOR) -> Cancelled:
        """Cancel a job: pending ends ``dead`` now, claimed gets a durable cancel request for its run.

        With a ``Session`` it joins the caller's transaction (never commits);
        with an ``Engine`` it is its own short transaction.  See
        :func:`venturi_sa.ops.control.cancel`.
        """
        if isinstance(bind, Session):
            return runtime.cancel(self.models, require_session(bind, "cancel"), job_id, note, actor, self.registry)
        return runtime.cancel(self.models, require_engine(bind, "cancel"), job_id, note, actor, self.registry)

    def cancel_kind(self, engine: Engine, kind: str, note: str | None = None, *,
                    actor: str = runtime.DEFAULT_ACTOR) -> list[Cancelled]:
        """Cancel every pending or claimed job of ``kind``, in one transaction."""
        return runtime.cancel_kind(self.models, require_engine(engine, "cancel_kind"), kind, note, actor,
                                   registry=self.registry)

    def pause(self, engine: Engine, kind: str, *, reason: str | None = None, until: datetime | None = None,
              delay: timedelta | None = None, actor: str = runtime.DEFAULT_ACTOR) -> PauseInfo:
        """Pause ``kind`` (``"*"``: every kind) on every worker from commit on; persisted, with its reason."""
        return runtime.pause(self.models, require_engine(engine, "pause"), kind, reason=reason, until=until,
                             delay=delay, actor=actor)

    def resume(self, engine: Engine, kind: str, *, actor: str = runtime.DEFAULT_ACTOR) -> PauseInfo:
        """End ``kind``'s pause now; ``InvalidTransition`` if it is not paused."""
        return runtime.resume(self.models, require_engine(engine, "resume"), kind, actor)

    def pauses(self, engine: Engine, *, in_force_only: bool = True) -> list[PauseInfo]:
        """The pauses in force (or the recent record of pauses), newest first."""
        return runtime.pauses(self.models, require_engine(engine, "pauses"), in_force_only=in_force_only)

    def edit(self, engine: Engine, job_id: str, *, priority: int | None = None, run_at: datetime | None = None,
             delay: timedelta | None = None, run_now: bool = False, payload: Any = None, note: str | None = None,
             actor: str = runtime.DEFAULT_ACTOR) -> JobInfo:
        """Change a pending job's priority, run time or payload (schema-validated); journaled."""
        return runtime.edit(self.models, self.registry, require_engine(engine, "edit"), job_id, priority=priority,
                            run_at=run_at, delay=delay, run_now=run_now, payload=payload, note=note, actor=actor,
                            max_payload_bytes=self.max_payload_bytes)

    def retry_now(self, engine: Engine, job_id: str, note: str | None = None, *,
                  actor: str = runtime.DEFAULT_ACTOR) -> JobInfo:
        """Make a pending job in backoff (or scheduled) eligible now; journaled."""
        return runtime.retry_now(self.models, require_engine(engine, "retry_now"), job_id, note, actor)

    def explain(self, engine: Engine, job_id: str) -> Explanation:
        """Why the job is not running, from the database (see :mod:`venturi_sa.ops.explain`)."""
        return explain(self.models, require_engine(engine, "explain"), job_id)

    async def cancel_async(self, bind: AsyncSession | AsyncEngine, job_id: str, note: str | None = None, *,
                           actor: str = runtime.DEFAULT_ACTOR) -> Cancelled:
        """:meth:`cancel` on an ``AsyncSession`` (its transaction, never committed) or an ``AsyncEngine``."""
        if is_async_session(bind):
            session = require_async_session(bind, "cancel_async")
            return await session.run_sync(
                lambda s: runtime.cancel_in(self.models, s, job_id, note, actor, self.registry))
        engine = require_async_engine(bind, "cancel_async")
        return await _on_sync_engine(engine, "cancel_async",
                                     lambda e: runtime.cancel(self.models, e, job_id, note, actor, self.registry))

    async def pause_async(self, engine: AsyncEngine, kind: str, *, reason: str | None = None,
                          until: datetime | None = None, delay: timedelta | None = None,
                          actor: str = runtime.DEFAULT_ACTOR) -> PauseInfo:
        """:meth:`pause` on an ``AsyncEngine``."""
        return await _on_sync_engine(engine, "pause_async", lambda e: runtime.pause(
            self.models, e, kind, reason=reason, until=until, delay=delay, actor=actor))

    async def resume_async(self, engine: AsyncEngine, kind: str, *, actor: str = runtime.DEFAULT_ACTOR) -> PauseInfo:
        """:meth:`resume` on an ``AsyncEngine``."""
        return await _on_sync_engine(engine, "resume_async", lambda e: runtime.resume(self.models, e, kind, actor))

    async def edit_async(self, engine: AsyncEngine, job_id: str, *, priority: int | None = None,
                         run_at: datetime | None = None, delay: timedelta | None = None, run_now: bool = False,
                         payload: Any = None, note: str | None = None,
                         actor: str = runtime.DEFAULT_ACTOR) -> JobInfo:
        """:meth:`edit` on an ``AsyncEngine``."""
        return await _on_sync_engine(engine, "edit_async", lambda e: runtime.edit(
            self.models, self.registry, e, job_id, priority=priority, run_at=run_at, delay=delay, run_now=run_now,
            payload=payload, note=note, actor=actor, max_payload_bytes=self.max_payload_bytes))

    async def explain_async(self, engine: AsyncEngine, job_id: str) -> Explanation:
        """:meth:`explain` on an ``AsyncEngine``."""
        return await _on_sync_engine(engine, "explain_async", lambda e: explain(self.models, e, job_id))
