"""The queue: one prefix's mapped classes plus the registry of its task types."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timedelta
from typing import Any

from marshmallow import Schema
from sqlalchemy.orm import Session

from venturi_sa import enqueue as enqueueing
from venturi_sa.models import JobBase, Models
from venturi_sa.outcomes import RunOutcome
from venturi_sa.task import EmptyPayload, Registry, Task, task
from venturi_sa.worker.context import JobContext


class Queue:
    """A queue: ``models`` (from :func:`~venturi_sa.make_models`) and its task types.

    Registering a kind twice raises ``DuplicateKind``.
    """

    def __init__(self, models: Models, tasks: Iterable[type[Task]] = ()) -> None:
        self.models = models
        self.registry = Registry(tuple(tasks))

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
        Read ``job.id`` before the session closes.
        """
        return enqueueing.enqueue_many(self.models, self.registry, session, [task], priority=priority,
                                       delay=delay, run_at=run_at)[0]

    def enqueue_many(self, session: Session, tasks: Sequence[Task], *, priority: int | None = None,
                     delay: timedelta | None = None, run_at: datetime | None = None) -> list[JobBase]:
        """Add many jobs in batched INSERTs and one NOTIFY per kind; never commits."""
        return enqueueing.enqueue_many(self.models, self.registry, session, tasks, priority=priority,
                                       delay=delay, run_at=run_at)
