"""Jobs added to a Session directly (``session.add(Job(...))``): checked at flush, and they wake workers.

Two listeners on every :class:`~sqlalchemy.orm.Session` (registered once,
when venturi is imported):

* ``before_flush`` checks each new job of a queue prefix whose models have a
  ``Queue(..., check_added_jobs=True)``: its kind must be one of that queue's
  tasks and its payload must pass the task's schema, with the errors enqueue
  raises (``UnknownKind``, ``InvalidPayload``, ``InvalidOption``, also for a
  ``time_limit`` whose timeout is not a positive timedelta).  The flush
  then raises before anything is written; the session keeps the job pending
  (roll back or expunge it).  Every new job given an ``id`` by hand, of any
  queue, must give a ULID (``InvalidJobId`` otherwise, the same way).
* ``after_flush`` sends one ``NOTIFY`` per kind and prefix for the new jobs
  of that flush, through the flush's connection: delivered only if the
  transaction commits, dropped on rollback.  Jobs inserted by
  ``queue.enqueue`` never pass through here (their INSERT carries its own
  NOTIFY); a prefix whose queues all have ``notify=False`` sends none.

A queue registers itself here when it is made (:func:`register`); this
module knows it only as an :class:`AddedJobsQueue`, the few attributes the
listeners read, so it sits below the queue.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Protocol

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.orm import Session

from venturi_sa import payloads
from venturi_sa.declarations.time_checks import check_timeout
from venturi_sa.errors import UnknownKind
from venturi_sa.models import JobBase, Models
from venturi_sa.models.job_ids import check_job_id
from venturi_sa.prefix import Names
from venturi_sa.states import Status
from venturi_sa.storage.session_adds import notify_kinds
from venturi_sa.task import Registry, check_priority


class AddedJobsQueue(Protocol):
    """What the flush listeners read of a queue (a :class:`~venturi_sa.Queue` is one)."""

    models: Models
    registry: Registry
    max_payload_bytes: int
    check_added_jobs: bool
    notify: bool


_QUEUES: dict[type, list[AddedJobsQueue]] = {}


def register(queue: AddedJobsQueue) -> None:
    """Make ``queue`` known to its models' ``Job`` class (for the flush checks and ``notify``).

    Held for the life of the process, as SQLAlchemy holds its mapped classes.
    """
    _QUEUES.setdefault(queue.models.Job, []).append(queue)


def queues_of_models() -> list[AddedJobsQueue]:
    """Every queue made in this process, in the order made."""
    return [queue for queues in _QUEUES.values() for queue in queues]


def _new_jobs(session: Session) -> list[JobBase]:
    return [obj for obj in session.new if isinstance(obj, JobBase)]


def check_job(job: JobBase, queues: list[AddedJobsQueue]) -> None:
    """Raise as enqueue would if no checking queue of ``job``'s models accepts its kind and payload."""
    for queue in queues:
        if job.kind in queue.registry:
            task_type = queue.registry.get(job.kind)
            what = f"payload of {job.kind!r}"
            payloads.ensure_json(job.payload, what, queue.max_payload_bytes)
            task_type.from_stored(job.payload)
            if job.priority is not None:
                check_priority(job.priority)
            if job.time_limit is not None:
                check_timeout(job.time_limit.timeout, "time_limit.timeout")
            return
    kinds = sorted({kind for queue in queues for kind in queue.registry.kinds})
    raise UnknownKind(f"a Job of kind {job.kind!r} was added to the session, but no task of queue "
                      f"{job.__venturi_prefix__!r} has that kind; registered kinds: {', '.join(kinds) or 'none'}")


def _before_flush(session: Session, flush_context: Any, instances: Any) -> None:
    for job in _new_jobs(session):
        if job.id is not None:  # given by hand: a ULID, or no call taking a job id could reach it
            check_job_id(job.id, "Job.id")
        checking = [q for q in _QUEUES.get(type(job), ()) if q.check_added_jobs]
        if checking and (job.status is None or job.status == Status.PENDING.value):
            check_job(job, checking)


def _wakes(job_class: type) -> bool:
    queues = list(_QUEUES.get(job_class, ()))
    return not queues or any(q.notify for q in queues)


def _after_flush(session: Session, flush_context: Any) -> None:
    kinds: defaultdict[type[JobBase], set[str]] = defaultdict(set)
    for job in _new_jobs(session):
        if job.status in (None, Status.PENDING.value) and _wakes(type(job)):
            kinds[type(job)].add(job.kind)
    for job_class, woken in kinds.items():
        connection = session.connection(bind_arguments={"mapper": sa.inspect(job_class)})
        if connection.dialect.name == "postgresql":  # the models may also serve an SQLite test suite
            notify_kinds(connection, Names(job_class.__venturi_prefix__).channel, sorted(woken))


if not event.contains(Session, "before_flush", _before_flush):
    event.listen(Session, "before_flush", _before_flush)
    event.listen(Session, "after_flush", _after_flush)
