"""venturi: a PostgreSQL job queue that joins your SQLAlchemy session.

Define tasks (:class:`Task`), put them in a :class:`Queue` built on
:func:`make_models`, enqueue inside your own transaction, and run a
:class:`Worker`.
"""

from __future__ import annotations

from venturi_sa.errors import (
    BadPrefix,
    DuplicateKind,
    InvalidOption,
    InvalidPayload,
    InvalidTransition,
    JobCancelled,
    JobNotCompleted,
    JobNotFound,
    LeaseLost,
    SchemaNotMigrated,
    UnknownKind,
    VenturiError,
)
from venturi_sa.models import Models, make_models
from venturi_sa.ops.records import JobView
from venturi_sa.outcomes import Coalesce, Complete, Die, Independent, Pause, Retry
from venturi_sa.prefix import validate_prefix
from venturi_sa.queue import Queue
from venturi_sa.states import Outcome, Status
from venturi_sa.task import Priority, Registry, Task, task
from venturi_sa.worker import JobContext, OutcomeContext, Worker, WorkerApp, WorkerOptions

__all__ = [
    "BadPrefix",
    "Coalesce",
    "Complete",
    "Die",
    "DuplicateKind",
    "Independent",
    "InvalidOption",
    "InvalidPayload",
    "InvalidTransition",
    "JobCancelled",
    "JobContext",
    "JobNotCompleted",
    "JobNotFound",
    "JobView",
    "LeaseLost",
    "Models",
    "Outcome",
    "OutcomeContext",
    "Pause",
    "Priority",
    "Queue",
    "Registry",
    "Retry",
    "SchemaNotMigrated",
    "Status",
    "Task",
    "UnknownKind",
    "VenturiError",
    "Worker",
    "WorkerApp",
    "WorkerOptions",
    "make_models",
    "task",
    "validate_prefix",
]
