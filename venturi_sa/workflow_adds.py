"""``queue.job(task, after=[...])``: a dependent added with ``session.add``, linked by the flush that inserts it.

:func:`defer` checks ``after=`` and ``if_parent_dead=`` when the ``Job`` is
built and keeps them on its instance state.  The flush that inserts the job
then locks its parents ``FOR KEY SHARE`` and writes its dependency rows on the
flush's connection (``after_flush_postexec``), in the caller's transaction:
commit publishes them with the job, rollback leaves neither.  A parent that
does not exist then raises ``JobNotFound`` out of the flush (roll back).

Dependency rows written by a flush (these, and ``ParentLink`` rows added to
the session by hand) are then checked for cycles: a job that is its own
parent, or jobs of one flush naming each other (or an id given by hand that
an existing dependent already names as its parent), raise
``DependencyCycle`` out of the flush, and nothing of the transaction can be
committed (roll back).  ``queue.enqueue(..., after=)`` needs no check: its
jobs get fresh ids and their parents exist before them.  ``ParentLink`` rows
are checked once a ``Queue`` of their models exists in the process (the
check needs its table names), and only on PostgreSQL.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.orm import Session

from venturi_sa.errors import DependencyCycle, JobNotFound
from venturi_sa.models import JobBase, Models
from venturi_sa.models.workflow_tables import ParentLinkBase
from venturi_sa.session_adds import queues_of_models
from venturi_sa.storage import dependent_reads, dependents
from venturi_sa.workflows import Waits, check_policy, parent_ids

_KEY = "venturi_after"
_PENDING = "venturi_after_jobs"
_LINKED = "venturi_linked_jobs"


def defer(models: Models, job: JobBase, after: object, if_parent_dead: object) -> JobBase:
    """Check ``after=`` for a ``Job`` not added yet and keep it for the flush that inserts ``job``."""
    policy = check_policy(if_parent_dead)
    if after is not None:
        ids = parent_ids(models, None, after)
        if ids:
            sa.inspect(job).info[_KEY] = (models, ids, policy)
    return job


def _collect(session: Session, flush_context: Any) -> None:
    found = [obj for obj in session.new if isinstance(obj, JobBase) and _KEY in sa.inspect(obj).info]
    if found:
        session.info.setdefault(_PENDING, []).extend(found)
    links = [obj for obj in session.new if isinstance(obj, ParentLinkBase)]
    for link in links:
        models = _models_of(type(link))
        if models is not None:
            session.info.setdefault(_LINKED, {}).setdefault(models.prefix, (models, set()))[1].add(link.job_id)


def _models_of(link_class: type) -> Models | None:
    return next((q.models for q in queues_of_models() if q.models.workflow.ParentLink is link_class), None)


def _link(session: Session, flush_context: Any) -> None:
    jobs = session.info.pop(_PENDING, [])
    linked: dict[str, tuple[Models, set[str]]] = session.info.pop(_LINKED, {})
    for job in jobs:
        models, ids, policy = sa.inspect(job).info.pop(_KEY)
        connection = session.connection()
        statuses = dependents.lock_parents(models, connection, ids)
        missing = [i for i in ids if i not in statuses]
        if missing:
            raise JobNotFound(f"after=: no job {', '.join(repr(i) for i in missing)} in queue "
                              f"{models.prefix!r} (parents must exist when the dependent is inserted)")
        Waits(models=models, session=session, parents=ids, policy=policy, statuses=statuses).attach([job.id])
        session.expire(job, ["status", "visible_at", "finished_at"])
        linked.setdefault(models.prefix, (models, set()))[1].add(job.id)
    for models, job_ids in linked.values():
        _refuse_cycles(session, models, sorted(job_ids))


def _refuse_cycles(session: Session, models: Models, job_ids: list[str]) -> None:
    connection = session.connection(bind_arguments={"mapper": sa.inspect(models.Job)})
    if connection.dialect.name != "postgresql":  # the models may also serve an SQLite test suite
        return
    looped = dependent_reads.first_in_cycle(models, connection, job_ids)
    if looped is not None:
        raise DependencyCycle(f"after=: job {looped!r} would wait for itself (it is its own parent, or its "
                              f"parents wait for it) in queue {models.prefix!r}; roll the session back, "
                              "nothing can be committed")


event.listen(Session, "after_flush", _collect)
event.listen(Session, "after_flush_postexec", _link)
