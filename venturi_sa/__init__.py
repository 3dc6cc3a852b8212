"""venturi: a PostgreSQL job queue that joins your SQLAlchemy session.

Define tasks (:class:`Task`), put them in a :class:`Queue` built on
:func:`make_models`, enqueue inside your own transaction, and run a
:class:`Worker`.  The records the queue's operations return (``JobInfo``,
``JobView``, ``JournalInfo``, ``Page``, ``Stats``, ``Cancelled``,
``PauseInfo``, ``Explanation``, ``ScheduleInfo``, ``FireInfo``) are
exported here too.
"""

from __future__ import annotations

from venturi_sa.declarations.limit_rules import Rate
from venturi_sa.declarations.merge_rules import Coalesce, Debounce, Independent
from venturi_sa.declarations.run_outcomes import Complete, Die, Pause, Retry
from venturi_sa.declarations.task_contexts import JobContext, OutcomeContext
from venturi_sa.errors import (
    BadPrefix,
    DependencyCycle,
    DuplicateKind,
    InvalidJobId,
    InvalidOption,
    InvalidPayload,
    InvalidTransition,
    JobCancelled,
    JobNotCompleted,
    JobNotFound,
    LeaseLost,
    SchemaNotMigrated,
    SignalConflict,
    Suspended,
    TooManySignals,
    UnknownKind,
    VenturiError,
)
from venturi_sa.models import Models, make_models
from venturi_sa.ops.cancel import Cancelled
from venturi_sa.ops.explain import Explanation
from venturi_sa.ops.job_steps import SignalInfo, Signalled, StepInfo
from venturi_sa.ops.limits import LimitInfo
from venturi_sa.ops.pause import PauseInfo
from venturi_sa.ops.records import FireInfo, JobInfo, JobView, JournalInfo, Page, ScheduleInfo, Stats
from venturi_sa.prefix import validate_prefix
from venturi_sa.queue import Queue
from venturi_sa.states import Outcome, Status
from venturi_sa.task import Priority, Registry, Task, task
from venturi_sa.worker import Worker, WorkerApp, WorkerOptions

__all__ = [
    "BadPrefix",
    "Cancelled",
    "Coalesce",
    "Complete",
    "Debounce",
    "DependencyCycle",
    "Die",
    "DuplicateKind",
    "Explanation",
    "FireInfo",
    "Independent",
    "InvalidJobId",
    "InvalidOption",
    "InvalidPayload",
    "InvalidTransition",
    "JobCancelled",
    "JobContext",
    "JobInfo",
    "JobNotCompleted",
    "JobNotFound",
    "JobView",
    "JournalInfo",
    "LeaseLost",
    "LimitInfo",
    "Models",
    "Outcome",
    "OutcomeContext",
    "Page",
    "Pause",
    "PauseInfo",
    "Priority",
    "Queue",
    "Rate",
    "Registry",
    "Retry",
    "ScheduleInfo",
    "SchemaNotMigrated",
    "SignalConflict",
    "SignalInfo",
    "Signalled",
    "Stats",
    "Status",
    "StepInfo",
    "Suspended",
    "TooManySignals",
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
