"""``after=``: jobs that wait for other jobs (chains, fan-out/fan-in, batch callbacks).

``queue.enqueue(session, task, after=[job or id, ...], if_parent_dead=...)``
checks the parents, locks them ``FOR KEY SHARE`` in the caller's
transaction (a parent's terminal transaction locks it ``FOR UPDATE``
before it settles its dependents, so no parent's outcome can commit unseen
between the read and the dependent's insert; a running parent's lease
renewal is not held back), inserts the dependent and its dependency rows, and
makes it wait (``pending`` with ``visible_at = 'infinity'``) until every
parent is terminal.  Everything rides the caller's transaction: commit
publishes the jobs and their dependencies, rollback leaves neither.  The
release itself happens in the parent's terminal transaction
(:mod:`venturi_sa.storage.dependents`).  SQL is in the storage package.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TypeVar

import sqlalchemy as sa
from sqlalchemy.orm import Session

from venturi_sa.enqueue import Call
from venturi_sa.errors import InvalidOption, JobNotFound
from venturi_sa.models import JobBase, Models
from venturi_sa.models.job_ids import check_job_id
from venturi_sa.models.workflow_tables import POLICIES
from venturi_sa.states import Status
from venturi_sa.storage import dependents
from venturi_sa.storage.dependents import LinkParams

ParentRef = JobBase | str
"""An ``after=`` item: a ``Job`` of this queue, or a job id."""
_TERMINAL = frozenset({Status.COMPLETED.value, Status.DEAD.value})
J = TypeVar("J", JobBase, str)


def check_policy(policy: object) -> str:
    if policy not in POLICIES:
        raise InvalidOption(f"if_parent_dead must be 'cancel' or 'run', got {policy!r}")
    return str(policy)


def parent_ids(models: Models, session: Session | None, after: object) -> tuple[str, ...]:
    """The ids of ``after``'s items, duplicates dropped (the first position kept).

    A ``Job`` pending in ``session`` is flushed first; a ``Job`` of another
    queue prefix, a ``Job`` without an id or an item that is neither a
    ``Job`` nor a ``str`` raises ``InvalidOption``; an id that is not a ULID
    ``InvalidJobId`` (both before any SQL).
    """
    if isinstance(after, (str, bytes, JobBase)) or not isinstance(after, Sequence):
        raise InvalidOption(f"after= takes a list of jobs or job ids, got {type(after).__name__}")
    ids: dict[str, None] = {}
    for item in after:
        if isinstance(item, JobBase):
            prefix = getattr(type(item), "__venturi_prefix__", None)
            if prefix != models.prefix:
                raise InvalidOption(f"after=: job {item.id!r} belongs to queue {prefix!r}, not {models.prefix!r}")
            state = sa.inspect(item)
            if session is not None and state.session is session and state.pending:
                session.flush([item])
            if item.id is None:
                raise InvalidOption("after=: a Job without an id (add it to this session, or flush it first)")
            ids.setdefault(check_job_id(item.id, "after= item"))
        elif isinstance(item, str):
            ids.setdefault(check_job_id(item, "after= item"))
        else:
            raise InvalidOption(f"after= items must be Job objects or job ids, got {type(item).__name__}")
    return tuple(ids)


@dataclass
class Waits:
    """The parents of one enqueue call, checked and locked; :meth:`attach` links the new jobs to them."""

    models: Models | None = None
    session: Session | None = None
    parents: tuple[str, ...] = ()
    policy: str = "cancel"
    statuses: dict[str, str] = field(default_factory=dict)

    def attach(self, jobs: list[J]) -> list[J]:
        """Insert the dependency rows of ``jobs`` (the call's new jobs or their ids) and make them wait.

        A dependent whose parent is already dead under ``"cancel"`` is
        inserted ``dead`` with a journal row naming that parent; one whose
        parents are all terminal (or ``"run"``) stays eligible.
        """
        if not self.parents or not jobs:
            return jobs
        assert self.models is not None and self.session is not None
        remaining = sum(1 for p in self.parents if self.statuses[p] not in _TERMINAL)
        killer = next((p for p in self.parents if self.statuses[p] == Status.DEAD.value), None)
        ids = [job if isinstance(job, str) else job.id for job in jobs]
        dependents.link(self.models, self.session, LinkParams(
            job_ids=ids, parents=self.parents, policy=self.policy, remaining=remaining,
            killer=killer if self.policy == "cancel" else None), self.statuses)
        for job in jobs:
            if not isinstance(job, str):
                self.session.expire(job, ["status", "visible_at", "finished_at"])
        return jobs


NO_PARENTS = Waits()


def prepare(models: Models, session: Session, call: Call, after: object, if_parent_dead: object) -> Waits:
    """Check ``after=`` and ``if_parent_dead=`` and lock the parents ``FOR KEY SHARE``; nothing is written.

    Raises ``InvalidOption`` (bad items, a bad policy, a task with a dedup
    key), ``UnsupportedIsolation`` outside READ COMMITTED and
    ``JobNotFound`` for an id that is in neither the jobs table nor the
    archive.  The locks are held until the caller's transaction ends: a
    long enqueuing transaction holds back its parents' outcome writes (and
    the claim of a pending parent), never a running parent's lease renewal.
    """
    policy = check_policy(if_parent_dead)
    if after is None:
        return NO_PARENTS
    ids = parent_ids(models, session, after)
    if not ids:
        return NO_PARENTS
    for p in call.tasks:
        if p.dedup_key is not None:
            raise InvalidOption(f"{type(p.task).__name__} has a dedup key ({p.dedup_key!r}): a job with after= "
                                "cannot be deduplicated in this version (a waiting job is never a merge target)")
    statuses = dependents.lock_parents(models, session, ids)
    missing = [i for i in ids if i not in statuses]
    if missing:
        raise JobNotFound(f"after=: no job {', '.join(repr(i) for i in missing)} in queue {models.prefix!r} "
                          "(parents must exist when the dependent is enqueued); nothing was enqueued")
    return Waits(models=models, session=session, parents=ids, policy=policy, statuses=statuses)
