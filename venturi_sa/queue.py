"""The queue: one prefix's mapped classes plus the registry of its task types."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timedelta
from typing import Any

from marshmallow import Schema
from sqlalchemy import Engine
from sqlalchemy.orm import Session

from venturi_sa import enqueue as enqueueing
from venturi_sa.models import JobBase, Models
from venturi_sa.ops import admin, cleanup, history, stats
from venturi_sa.ops.records import JobInfo, JournalInfo, Page, Stats
from venturi_sa.outcomes import RunOutcome
from venturi_sa.task import EmptyPayload, Registry, Task, task
from venturi_sa.worker.context import JobContext

EnqueueHook = Callable[[Session, list[JobBase]], None]


class Queue:
    """A queue: ``models`` (from :func:`~venturi_sa.make_models`) and its task types.

    Registering a kind twice raises ``DuplicateKind``.  With ``notify=False``
    enqueues send no ``NOTIFY`` (saving its commit-time cost, a few tenths of
    a millisecond): for deployments whose workers poll (``listen=False``).
    """

    def __init__(self, models: Models, tasks: Iterable[type[Task]] = (), *, notify: bool = True) -> None:
        self.models = models
        self.registry = Registry(tuple(tasks))
        self.notify = notify
        self.enqueue_hooks: list[EnqueueHook] = []
        """Each is called as ``hook(session, jobs)`` after an enqueue flushed its jobs, before it returns.

        Empty unless a test switches on ``venturi_sa.testing.inline(queue)``.
        """

    @property
    def prefix(self) -> str:
        return self.models.prefix

    def register(self, task_type: type[Task]) -> type[Task]:
        """Add a task type (usable as a class decorator)."""
        return self.registry.register(task_type)

    def task(self, kind: str, *, payload: type[Schema] = EmptyPayload, carry: type[Schema] | None = None,
             **policy: Any) -> Callable[[Callable[[Any, JobContext], RunOutcome | None]], type[Task]]:
        """Decorate ``fn(payload, ctx)`` into a registered task type (see :func:`venturi_sa.task`)."""

        def wrap(fn: Callable[[Any, JobContext], RunOutcome | None]) -> type[Task]:
            return self.register(task(kind, payload=payload, carry=carry, **policy)(fn))

        return wrap

    def enqueue(self, session: Session, task: Task, *, priority: int | None = None,
                delay: timedelta | None = None, run_at: datetime | None = None) -> JobBase:
        """Add one job to the caller's ``session`` and flush; never commits.

        Commit publishes the job and wakes idle workers; rollback discards it.
        ``delay`` counts from this call on the database clock.  A task with a
        dedup key may return an existing pending job instead, and needs a READ
        COMMITTED transaction (``UnsupportedIsolation`` otherwise).  Bad input
        raises with the session as it was.  Read ``job.id`` before the session
        closes.
        """
        return self.enqueue_many(session, [task], priority=priority, delay=delay, run_at=run_at)[0]

    def enqueue_many(self, session: Session, tasks: Sequence[Task], *, priority: int | None = None,
                     delay: timedelta | None = None, run_at: datetime | None = None) -> list[JobBase]:
        """Add many jobs in one INSERT (which also sends one NOTIFY per kind); never commits.

        Every task is validated and every dedup merge decided before anything
        is written, so one bad task or failing ``merge()`` raises with the
        session as it was.  Commit publishes them all; rollback discards them.
        """
        jobs = enqueueing.enqueue_many(self.models, self.registry, session, tasks, notify=self.notify,
                                       priority=priority,
                                       delay=delay, run_at=run_at)
        for hook in self.enqueue_hooks:
            hook(session, jobs)
        return jobs

    # -- operating the queue: history, stats, retention, admin (venturi_sa/ops/) ---------------
    # Each method opens its own short transaction(s) on ``engine``; never the application's session.

    def get_job(self, engine: Engine, job_id: str) -> JobInfo:
        """The job's current row; raises ``JobNotFound`` if there is none."""
        return history.get_job(self.models, engine, job_id)

    def journal(self, engine: Engine, job_id: str) -> list[JournalInfo]:
        """The job's journal timeline, oldest first; ``JobNotFound`` if the job does not exist."""
        return history.journal(self.models, engine, job_id)

    def history(self, engine: Engine, *, status: str | Sequence[str] | None = None, kind: str | None = None,
                finished_after: datetime | None = None, finished_before: datetime | None = None,
                limit: int = 50, cursor: str | None = None) -> Page:
        """Jobs newest first, keyset-paged by an opaque ``cursor`` (see :func:`venturi_sa.ops.history.history`)."""
        return history.history(self.models, engine, status=status, kind=kind,
                               finished_after=finished_after, finished_before=finished_before,
                               limit=limit, cursor=cursor)

    def stats(self, engine: Engine) -> Stats:
        """Counts by status and kind, eligible vs scheduled, in flight, dead, oldest eligible age."""
        return stats.stats(self.models, engine)

    def cleanup(self, engine: Engine, *, before: datetime | None = None, older_than: timedelta | None = None,
                status: str | Sequence[str] | None = None, kind: str | None = None, batch_size: int = 1000,
                dry_run: bool = False, progress: Callable[[int], None] | None = None) -> int:
        """Delete terminal jobs finished before the cutoff in short batches; returns the count."""
        return cleanup.cleanup(self.models, engine, before=before, older_than=older_than,
                               status=status, kind=kind, batch_size=batch_size, dry_run=dry_run,
                               progress=progress)

    def requeue(self, engine: Engine, job_id: str, note: str | None = None) -> JobInfo:
        """Operator: ``dead`` -> ``pending`` now, with a fresh set of tries; journaled."""
        return admin.requeue(self.models, engine, job_id, note)

    def kill(self, engine: Engine, job_id: str, note: str | None = None) -> JobInfo:
        """Operator: ``pending`` -> ``dead``; journaled."""
        return admin.kill(self.models, engine, job_id, note)

    def release(self, engine: Engine, job_id: str, note: str | None = None) -> JobInfo:
        """Operator: ``claimed`` -> ``pending`` now, no failure counted (its worker is gone); journaled."""
        return admin.release(self.models, engine, job_id, note)
