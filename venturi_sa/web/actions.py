"""The dashboard's actions: what a button may do to jobs, and the registry other features extend.

An :class:`Action` applies to one job at a time through the operations API
(:mod:`venturi_sa.ops.admin` for the built-in ones), each job in its own short
transaction: on commit the change and its journal row (naming the actor)
exist; a job whose status does not allow the action is skipped and left
unchanged; a crash mid-way leaves the jobs done so far done and the rest as
they were.  Features that add operations (pausing kinds, cancelling, schedules)
register their own :class:`Action` objects with :func:`~venturi_sa.web.create_app`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import sqlalchemy as sa

from venturi_sa.errors import InvalidTransition, JobNotFound
from venturi_sa.models import Models
from venturi_sa.ops import admin
from venturi_sa.states import Status


@dataclass(frozen=True, kw_only=True)
class ActionContext:
    """What an action needs besides the job id: the queue, the engine, who acts and why."""

    models: Models
    engine: sa.Engine
    actor: str
    note: str | None = None


@dataclass(frozen=True, kw_only=True)
class Action:
    """One operation the dashboard offers on selected jobs.

    ``statuses`` are the job statuses it applies to (a bulk "all matching"
    walk only visits those); ``run(ctx, job_id)`` applies it to one job in its
    own transaction and raises ``InvalidTransition`` or ``JobNotFound`` when
    that job cannot take it (the job is then skipped, unchanged).
    """

    name: str
    label: str
    statuses: tuple[str, ...]
    run: Callable[[ActionContext, str], object]
    danger: bool = False
    help: str = ""


def _requeue(ctx: ActionContext, job_id: str) -> object:
    return admin.requeue(ctx.models, ctx.engine, job_id, ctx.note, actor=ctx.actor)


def _kill(ctx: ActionContext, job_id: str) -> object:
    return admin.kill(ctx.models, ctx.engine, job_id, ctx.note, actor=ctx.actor)


def _release(ctx: ActionContext, job_id: str) -> object:
    return admin.release(ctx.models, ctx.engine, job_id, ctx.note, actor=ctx.actor)


BUILTIN_ACTIONS: tuple[Action, ...] = (
    Action(name="requeue", label="Requeue", statuses=(Status.DEAD.value,), run=_requeue,
           help="dead → pending, visible now, failure count reset"),
    Action(name="kill", label="Kill", statuses=(Status.PENDING.value,), run=_kill, danger=True,
           help="pending → dead"),
    Action(name="release", label="Release", statuses=(Status.CLAIMED.value,), run=_release,
           help="claimed → pending (the worker's outcome is then discarded)"),
)
"""requeue (dead), kill (pending), release (claimed): :mod:`venturi_sa.ops.admin`."""


@dataclass(kw_only=True)
class Outcome:
    """How a bulk action went: ids changed, ids skipped (with why), and whether more may match."""

    applied: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    truncated: bool = False

    def merge(self, other: Outcome) -> None:
        self.applied += other.applied
        self.skipped.update(other.skipped)
        self.truncated = self.truncated or other.truncated


def apply_each(action: Action, ctx: ActionContext, job_ids: Sequence[str]) -> Outcome:
    """Run ``action`` on each job in turn (one transaction each); refusals are skipped, not raised."""
    outcome = Outcome()
    for job_id in job_ids:
        try:
            action.run(ctx, job_id)
        except (InvalidTransition, JobNotFound) as exc:
            outcome.skipped[job_id] = str(exc)
        else:
            outcome.applied.append(job_id)
    return outcome


def registry(extra: Sequence[Action] = ()) -> dict[str, Action]:
    """The built-in actions plus ``extra`` by name; a name given twice is an error."""
    found: dict[str, Action] = {}
    for action in (*BUILTIN_ACTIONS, *extra):
        if action.name in found:
            raise ValueError(f"dashboard action {action.name!r} is registered twice")
        found[action.name] = action
    return found
