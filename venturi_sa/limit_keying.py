"""Limit keys: each new or changed job's ``Task.limit_key()``, stored beside it (``<prefix>_limit_keys``).

Called by enqueue after its insert (and after a merge changed a pending
job's payload) and by ``queue.edit`` after a payload change, in the
caller's transaction: the keys commit and roll back with the jobs.  Kinds
whose task does not override ``limit_key`` cost one type check.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from venturi_sa.declarations.limit_rules import check_key
from venturi_sa.errors import InvalidPayload, VenturiError
from venturi_sa.models import Models
from venturi_sa.storage import limit_keys as store
from venturi_sa.storage.params import Runner
from venturi_sa.task import Task, is_keyed


class _Prepared(Protocol):
    task: Task
    kind: str
    job_id: str
    payload: Any
    absorbed: bool


def check_new(tasks: Sequence[_Prepared]) -> None:
    """Raise ``InvalidOption`` if a task's ``limit_key()`` is not None or a valid key (nothing is written)."""
    for p in tasks:
        if is_keyed(type(p.task)):
            check_key(p.task.limit_key(), p.kind)


def store_new(models: Models, runner: Runner, tasks: Sequence[_Prepared], merged: Mapping[str, Any]) -> None:
    """Store the keys of an enqueue's jobs: each inserted job's, and each merge target's from its merged payload.

    ``merged`` maps a merge target's id to its payload after the merges.
    """
    rows: dict[str, tuple[str, str | None]] = {}
    for p in tasks:
        task_type = type(p.task)
        if not is_keyed(task_type):
            continue
        if p.job_id in merged:
            rows[p.job_id] = (p.kind, key_of(task_type, merged[p.job_id]))
        elif not p.absorbed:
            rows[p.job_id] = (p.kind, check_key(p.task.limit_key(), p.kind))
    if rows:
        store.set_keys(models, runner, [(job_id, kind, key) for job_id, (kind, key) in rows.items()])


def key_of(task_type: type[Task], payload: Any) -> str | None:
    """The limit key of a job of ``task_type`` with the stored ``payload``."""
    return check_key(task_type.from_stored(payload).limit_key(), task_type.KIND)


def edited_key(task_type: type[Task], payload: Any) -> str | None:
    """The key of an edited job from its new stored ``payload`` (None if its task is not keyed), read before any write.

    ``limit_key()`` is the task's own code: anything it raises on the new
    payload is refused as ``InvalidPayload`` naming the error (a bad key
    returned is ``InvalidOption``, as at enqueue).
    """
    if not is_keyed(task_type):
        return None
    try:
        return key_of(task_type, payload)
    except VenturiError:
        raise
    except Exception as exc:  # the task's code, on a payload it was never given at enqueue
        raise InvalidPayload(f"the new payload breaks {task_type.__name__}.limit_key(): it raised "
                             f"{type(exc).__name__}: {str(exc)[:200]}; nothing was written") from exc


def store_edited(models: Models, runner: Runner, task_type: type[Task], job_id: str, key: str | None) -> None:
    """Store an edited job's key (:func:`edited_key`, computed before the edit was written)."""
    if is_keyed(task_type):
        store.set_keys(models, runner, [(job_id, task_type.KIND, key)])
