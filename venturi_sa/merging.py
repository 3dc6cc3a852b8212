"""Debounce and throttle at enqueue: the merge decision, and the hold that moves a merged job later.

The policies are declared on the task class and checked there
(:mod:`venturi_sa.declarations.merge_rules`); enqueue calls :func:`decide`
for a task that meets a pending sibling of its ``dedup_key`` and
:func:`hold` after its writes.  The hold's SQL is
:mod:`venturi_sa.storage.merge_timing`; it runs in the enqueue's session,
so commit keeps the moved times, rollback undoes them, and a crash before
commit leaves nothing of them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from sqlalchemy.orm import Session
from sqlalchemy.orm.attributes import set_committed_value

from venturi_sa.declarations.merge_rules import NO_TIMING, Coalesce, MergeDecision, Timing, timing
from venturi_sa.models import JobBase, Models
from venturi_sa.storage import merge_timing
from venturi_sa.storage.merge_timing import HeldJob, HoldParams
from venturi_sa.task import Task


def timing_of(task_type: type[Task]) -> Timing:
    """The debounce and throttle of ``task_type`` (falsy when it has neither)."""
    return timing(task_type.debounce, task_type.throttle)


def decide(task: Task, payload: Any, existing: JobBase, default_merge: Callable[..., Any]) -> MergeDecision:
    """The merge decision for ``task`` (stored ``payload``) against ``existing``.

    A debounced or throttled task that keeps the base ``merge()`` coalesces
    with its own, newest payload; otherwise its ``merge()`` decides.
    """
    task_type = type(task)
    if task_type.merge is default_merge and timing_of(task_type):
        return Coalesce(payload)
    return task.merge(existing)


def hold(models: Models, session: Session, written: Sequence[tuple[type[Task], str | None, JobBase]]) -> None:
    """After an enqueue's writes: move each debounced or throttled job it created or merged into.

    ``written`` is one ``(task type, dedup key, job)`` per enqueued task (the
    job it ended in).  A task with no key, or a type with neither policy, is
    left alone; each job's ``visible_at`` attribute is set to the value
    written, in the caller's transaction (commit keeps it, rollback undoes it).
    """
    jobs: dict[str, tuple[Timing, JobBase]] = {}
    for task_type, key, job in written:
        held_by = timing_of(task_type) if key is not None else NO_TIMING
        if held_by:
            jobs[job.id] = (held_by, job)
    if not jobs:
        return
    moved = merge_timing.hold(models, session, HoldParams(jobs=[
        HeldJob(job_id=job_id, window=t.window, max_wait=t.max_wait, throttle=t.throttle)
        for job_id, (t, _) in jobs.items()]))
    for job_id, visible_at in moved.items():
        set_committed_value(jobs[job_id][1], "visible_at", visible_at)


__all__ = ["decide", "hold", "timing_of"]
