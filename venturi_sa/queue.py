"""The queue: one prefix's mapped classes plus the registry of its task types.

``Queue`` holds construction, task registration, schedule declaration and
enqueue; the operator actions (``queue.<action>(engine, ...)``) are its base
class, :class:`venturi_sa.ops.face.Operations`.  Enqueue takes a ``Session``
and has ``*_async`` forms taking an ``AsyncSession``, run through
``AsyncSession.run_sync`` (the same code, so the same guarantees).  A sync
object passed to an async call, or the reverse, raises ``TypeError`` naming
the call to use (see :mod:`venturi_sa.binds`).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal, overload

from marshmallow import Schema
from sqlalchemy.orm import Session

from venturi_sa import enqueue as enqueueing
from venturi_sa import payloads, session_adds, workflow_adds, workflows
from venturi_sa.binds import require_async_session, require_session
from venturi_sa.models import JobBase, Models
from venturi_sa.ops.archive import DEFAULT_ARCHIVE_AFTER
from venturi_sa.ops.face import Operations
from venturi_sa.ops.job_steps import DEFAULT_MAX_SIGNAL_BYTES, DEFAULT_MAX_SIGNALS
from venturi_sa.periodic import declare as periodic
from venturi_sa.run_hooks import NO_HOOKS, RunHooks
from venturi_sa.task import EmptyPayload, Handler, Registry, Task, check_policy_keys, task

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncSession

EnqueueHook = Callable[[Session, list[JobBase]], None]


def _session_class_of(models: Models) -> type[Session]:
    """``sqlmodel.Session`` if ``models`` live in ``SQLModel.metadata``, else ``Session``."""
    sqlmodel = sys.modules.get("sqlmodel")  # models on SQLModel's metadata imply it was imported
    if sqlmodel is not None and models.jobs_table.metadata is sqlmodel.SQLModel.metadata:
        cls: type[Session] = sqlmodel.Session
        return cls
    return Session


def _async_session_class_of(models: Models) -> type[AsyncSession]:
    """sqlmodel's ``AsyncSession`` if ``models`` live in ``SQLModel.metadata``, else SQLAlchemy's."""
    sqlmodel = sys.modules.get("sqlmodel")
    if sqlmodel is not None and models.jobs_table.metadata is sqlmodel.SQLModel.metadata:
        from sqlmodel.ext.asyncio.session import AsyncSession as SQLModelAsyncSession

        cls: type[AsyncSession] = SQLModelAsyncSession
        return cls
    from sqlalchemy.ext.asyncio import AsyncSession as PlainAsyncSession  # here: it needs greenlet to be used

    return PlainAsyncSession


class Queue(Operations):
    """A queue: ``models`` (from :func:`~venturi_sa.make_models`) and its task types.

    Its operator actions (inspect, cancel, pause, edit, requeue, schedules,
    ...) are :class:`~venturi_sa.ops.face.Operations`, each with an
    ``*_async`` twin.

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
    until cleanup, as before v9.  ``max_signals_per_job`` (default 1,000)
    and ``max_signal_bytes_per_job`` (default 16 MiB of payload JSON) bound
    the signals one job keeps: ``queue.signal`` past either raises
    ``TooManySignals`` and writes nothing (docs/steps.md).
    """

    def __init__(self, models: Models, tasks: Iterable[type[Task]] = (), *, notify: bool = True,
                 check_added_jobs: bool = False,
                 max_payload_bytes: int = payloads.DEFAULT_MAX_PAYLOAD_BYTES,
                 session_class: type[Session] | None = None,
                 async_session_class: type[AsyncSession] | None = None,
                 archive_after: timedelta | None = DEFAULT_ARCHIVE_AFTER,
                 max_signals_per_job: int = DEFAULT_MAX_SIGNALS,
                 max_signal_bytes_per_job: int = DEFAULT_MAX_SIGNAL_BYTES) -> None:
        super().__init__(models, Registry(tuple(tasks)), notify=notify, max_payload_bytes=max_payload_bytes,
                         archive_after=archive_after, max_signals_per_job=max_signals_per_job,
                         max_signal_bytes_per_job=max_signal_bytes_per_job)
        self.session_class: type[Session] = session_class or _session_class_of(models)
        """The class of a handler's ``ctx.session`` in every runner (workers, ``drain``, the plugin).

        Default: ``sqlmodel.Session`` for models made on ``SQLModel``'s
        metadata (``make_models(prefix, SQLModel)``), else ``Session``.
        """
        self._async_session_class = async_session_class
        self.schedules = periodic.ScheduleSet(self.registry)
        """The declared schedules (``schedule = ...`` on task types, and :meth:`schedule`)."""
        for task_type in self.registry:
            self.schedules.add_task_type(task_type)
        self.check_added_jobs = check_added_jobs
        session_adds.register(self)
        self.enqueue_hooks: list[EnqueueHook] = []
        """Each is called as ``hook(session, jobs)`` after an enqueue flushed its jobs, before it returns.

        Empty unless a test switches on ``venturi_sa.testing.inline(queue)`` or
        ``venturi_sa.contrib.otel.instrument(queue)`` added its own.
        """
        self.run_hooks: RunHooks = NO_HOOKS
        """The queue's own ``around_run``/``on_outcome`` hooks (:mod:`venturi_sa.run_hooks`), run by every runner."""

    @property
    def async_session_class(self) -> type[AsyncSession]:
        """The class of an ``async def`` handler's ``ctx.session_async`` in every runner (workers, ``drain_async``).

        Default: sqlmodel's ``AsyncSession`` (``sqlmodel.ext.asyncio.session``,
        which has ``.exec()``) for models made on ``SQLModel``'s metadata, else
        SQLAlchemy's ``AsyncSession``; resolved on first use, so a queue with
        no async handlers never imports ``sqlalchemy.ext.asyncio``.
        """
        if self._async_session_class is None:
            self._async_session_class = _async_session_class_of(self.models)
        return self._async_session_class

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
            run_at: datetime | None = None, timeout: timedelta | None = None,
            after: Sequence[JobBase | str] | None = None, if_parent_dead: str = "cancel") -> JobBase:
        """An unsaved, validated ``Job`` for ``task``: ``session.add(queue.job(...))`` enqueues it.

        Validated as :meth:`enqueue` validates, touching no session; the
        flush that inserts it sends the queue's ``NOTIFY`` (delivered on
        commit), and its times are the database clock at that INSERT (a
        ``timeout`` is inserted by the same flush).  A task with a dedup key
        raises ``InvalidOption``: use :meth:`enqueue`, whose merge needs the session.
        ``after=`` (ids, or jobs that have ids) is linked by the flush that
        inserts it (docs/workflows.md).
        """
        return workflow_adds.defer(self.models, enqueueing.build_job(
            self.models, self.registry, task, priority=priority, delay=delay, run_at=run_at, timeout=timeout,
            max_bytes=self.max_payload_bytes), after, if_parent_dead)

    def enqueue(self, session: Session, task: Task, *, priority: int | None = None,
                delay: timedelta | None = None, run_at: datetime | None = None,
                timeout: timedelta | None = None, after: Sequence[JobBase | str] | None = None,
                if_parent_dead: str = "cancel") -> JobBase:
        """Add one job to the caller's ``session`` and flush; never commits.

        Commit publishes the job and wakes idle workers; rollback discards it.
        ``delay`` counts from this call on the database clock.  ``timeout``
        (a positive timedelta) is this job's own time limit, overriding its
        task's ``timeout`` (stored beside it, in ``<prefix>_timeouts``).  A task with a
        dedup key may return an existing pending job instead, and needs a READ
        COMMITTED transaction (``UnsupportedIsolation`` otherwise).  Bad input
        raises with the session as it was.  Read ``job.id`` before the session
        closes.  ``after=`` (jobs or ids of this queue) makes it wait until
        each has ended; ``if_parent_dead="cancel"`` ends it dead if one dies,
        ``"run"`` runs it anyway.  The parents stay locked ``FOR KEY SHARE``
        until the caller's transaction ends (a long transaction holds back
        their outcome writes, never a running parent's lease renewal); it
        needs READ COMMITTED (docs/workflows.md).
        An ``AsyncSession`` raises ``TypeError``: use :meth:`enqueue_async`.
        """
        return self.enqueue_many(require_session(session, "enqueue"), [task], priority=priority,
                                 delay=delay, run_at=run_at, timeout=timeout, after=after,
                                 if_parent_dead=if_parent_dead)[0]

    @overload
    def enqueue_many(self, session: Session, tasks: Sequence[Task], *, priority: int | None = None,
                     delay: timedelta | None = None, run_at: datetime | None = None,
                     timeout: timedelta | None = None, ids_only: Literal[False] = False,
                     after: Sequence[JobBase | str] | None = None, if_parent_dead: str = "cancel") -> list[JobBase]: ...

    @overload
    def enqueue_many(self, session: Session, tasks: Sequence[Task], *, priority: int | None = None,
                     delay: timedelta | None = None, run_at: datetime | None = None,
                     timeout: timedelta | None = None, ids_only: Literal[True],
                     after: Sequence[JobBase | str] | None = None, if_parent_dead: str = "cancel") -> list[str]: ...

    def enqueue_many(self, session: Session, tasks: Sequence[Task], *, priority: int | None = None,
                     delay: timedelta | None = None, run_at: datetime | None = None,
                     timeout: timedelta | None = None, ids_only: bool = False,
                     after: Sequence[JobBase | str] | None = None,
                     if_parent_dead: str = "cancel") -> list[JobBase] | list[str]:
        """Add many jobs in one INSERT (which also sends one NOTIFY per kind); never commits.

        Every task is validated and every dedup merge decided before anything
        is written, so one bad task or failing ``merge()`` raises with the
        session as it was.  Commit publishes them all; rollback discards them.
        With ``ids_only=True`` it returns the job ids instead of ``Job``
        objects: the rows are inserted on the session's connection without
        ``RETURNING``, no object is added to the session and nothing is
        flushed (the fast bulk path; the same transaction, commit and rollback
        semantics).  Tasks with a dedup key make that call take the ordinary
        path (same locks and merges) and return its jobs' ids.  ``after=``
        gives every task the same parents (docs/workflows.md).
        An ``AsyncSession`` raises ``TypeError``: use :meth:`enqueue_many_async`.
        """
        checked = require_session(session, "enqueue_many")
        call = enqueueing.prepared(self.registry, tasks, priority=priority, delay=delay, run_at=run_at,
                                   timeout=timeout, notify=self.notify, max_bytes=self.max_payload_bytes)
        waits = workflows.prepare(self.models, checked, call, after, if_parent_dead)
        if ids_only and not self.enqueue_hooks:
            return waits.attach(enqueueing.enqueue_ids(self.models, checked, call))
        jobs = waits.attach(enqueueing.enqueue_many(self.models, checked, call))
        for hook in self.enqueue_hooks:
            hook(session, jobs)
        return [job.id for job in jobs] if ids_only else jobs

    async def enqueue_async(self, session: AsyncSession, task: Task, *, priority: int | None = None,
                            delay: timedelta | None = None, run_at: datetime | None = None,
                            timeout: timedelta | None = None, after: Sequence[JobBase | str] | None = None,
                            if_parent_dead: str = "cancel") -> JobBase:
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
                                              run_at=run_at, timeout=timeout, after=after,
                                              if_parent_dead=if_parent_dead))[0]

    @overload
    async def enqueue_many_async(self, session: AsyncSession, tasks: Sequence[Task], *,
                                 priority: int | None = None, delay: timedelta | None = None,
                                 run_at: datetime | None = None, timeout: timedelta | None = None,
                                 ids_only: Literal[False] = False, after: Sequence[JobBase | str] | None = None,
                                 if_parent_dead: str = "cancel") -> list[JobBase]: ...

    @overload
    async def enqueue_many_async(self, session: AsyncSession, tasks: Sequence[Task], *,
                                 priority: int | None = None, delay: timedelta | None = None,
                                 run_at: datetime | None = None, timeout: timedelta | None = None,
                                 ids_only: Literal[True], after: Sequence[JobBase | str] | None = None,
                                 if_parent_dead: str = "cancel") -> list[str]: ...

    async def enqueue_many_async(self, session: AsyncSession, tasks: Sequence[Task], *,
                                 priority: int | None = None, delay: timedelta | None = None,
                                 run_at: datetime | None = None, timeout: timedelta | None = None,
                                 ids_only: bool = False, after: Sequence[JobBase | str] | None = None,
                                 if_parent_dead: str = "cancel") -> list[JobBase] | list[str]:
        """:meth:`enqueue_many` in the caller's ``AsyncSession``; never commits (same guarantees, ``ids_only`` too)."""
        checked = require_async_session(session, "enqueue_many_async")

        def run(sync: Session) -> list[JobBase] | list[str]:
            if ids_only:
                return self.enqueue_many(sync, tasks, priority=priority, delay=delay, run_at=run_at,
                                         timeout=timeout, ids_only=True, after=after, if_parent_dead=if_parent_dead)
            return self.enqueue_many(sync, tasks, priority=priority, delay=delay, run_at=run_at, timeout=timeout,
                                     after=after, if_parent_dead=if_parent_dead)

        return await checked.run_sync(run)
