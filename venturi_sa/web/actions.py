"""The dashboard's actions: what a button may do to jobs, and the registry other features extend.

An :class:`Action` applies to one job at a time through the queue's operations
(:class:`venturi_sa.ops.face.Operations`, ``ctx.ops``, for the built-in ones),
each job in its own short transaction: on commit the change and its journal row
(naming the actor) exist; a job whose status does not allow the action is
skipped, left unchanged, and the reason shown; a crash mid-way leaves the jobs
done so far done and the rest as they were.  Features that
add operations register their own :class:`Action` objects with
:func:`~venturi_sa.web.create_app`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import sqlalchemy as sa

from venturi_sa.errors import InvalidTransition, JobNotFound, VenturiError
from venturi_sa.models import Models
from venturi_sa.ops.face import Operations
from venturi_sa.states import Status
from venturi_sa.task import Registry
from venturi_sa.web import forms, queries

log = logging.getLogger("venturi.web")


@dataclass(frozen=True, kw_only=True)
class ActionContext:
    """What an action needs besides the job id: the queue, the engine, who acts and why, its values.

    ``values`` is what the action's ``read`` returned for the submitted form;
    ``registry`` holds the task types the dashboard was given (payload edits
    validate through them).
    """

    models: Models
    engine: sa.Engine
    actor: str
    note: str | None = None
    values: Mapping[str, Any] = field(default_factory=dict)
    registry: Registry = field(default_factory=Registry)

    @property
    def ops(self) -> Operations:
        """The queue's operations (``ctx.ops.kill(ctx.engine, job_id, ...)``), with the dashboard's task types."""
        return Operations(self.models, self.registry)


def _no_values(form: Mapping[str, Any]) -> Mapping[str, Any]:
    return {}


@dataclass(frozen=True, kw_only=True)
class Action:
    """One operation the dashboard offers on selected jobs.

    ``statuses`` are the job statuses it applies to (a bulk "all matching"
    walk only visits those); ``run(ctx, job_id)`` applies it to one job in its
    own transaction and raises a ``VenturiError`` (``InvalidTransition``,
    ``JobNotFound``, ``InvalidPayload``, ...) when that job cannot take it (the
    job is then skipped, unchanged, and the reason shown); a string it returns
    is a remark counted in the summary.  ``fields`` are the form inputs it
    reads; ``read(form)`` checks them once, before any job is touched, and
    raises ``InvalidOption`` (the request is refused, nothing written).
    ``bulk=False`` offers it on the job page only.
    """

    name: str
    label: str
    statuses: tuple[str, ...]
    run: Callable[[ActionContext, str], object]
    danger: bool = False
    help: str = ""
    fields: tuple[str, ...] = ()
    read: Callable[[Mapping[str, Any]], Mapping[str, Any]] = _no_values
    bulk: bool = True


def _requeue(ctx: ActionContext, job_id: str) -> object:
    return ctx.ops.requeue(ctx.engine, job_id, ctx.note, actor=ctx.actor)


def _kill(ctx: ActionContext, job_id: str) -> object:
    return ctx.ops.kill(ctx.engine, job_id, ctx.note, actor=ctx.actor)


def _release(ctx: ActionContext, job_id: str) -> object:
    return ctx.ops.release(ctx.engine, job_id, ctx.note, actor=ctx.actor)


REQUESTED = ("still running: cancel requested; its worker delivers it at its next lease renewal (at once when "
             "it listens), and the run ends dead when its handler returns (a sync handler stops early only "
             "if it checks ctx.cancelled)")


def _cancel(ctx: ActionContext, job_id: str) -> object:
    done = ctx.ops.cancel(ctx.engine, job_id, ctx.note, actor=ctx.actor)
    return REQUESTED if done.result == "requested" else None


def _must_wait(ctx: ActionContext, job_id: str, what: str, *, backing_off: bool) -> None:
    """Refuse unless the job is pending and not yet eligible (``backing_off``: after a failure)."""
    found = queries.detail(ctx.models, ctx.engine, job_id)
    if found is None:
        raise JobNotFound(f"no job with id {job_id!r} in queue {ctx.models.prefix!r}")
    waiting = found.waiting_for
    if backing_off and waiting != "retried":
        state = found.job.status if found.job.status != Status.PENDING.value else (
            f"waiting ({waiting})" if waiting else "eligible already")
        raise InvalidTransition(f"{what} refused: job {job_id} is not backing off after a failure: it is {state}")
    if waiting is None:
        state = found.job.status if found.job.status != Status.PENDING.value else "eligible already"
        raise InvalidTransition(f"{what} refused: job {job_id} is {state}")


def _retry_now(ctx: ActionContext, job_id: str) -> object:
    _must_wait(ctx, job_id, "retry now", backing_off=True)
    return ctx.ops.retry_now(ctx.engine, job_id, ctx.note, actor=ctx.actor)


def _run_now(ctx: ActionContext, job_id: str) -> object:
    _must_wait(ctx, job_id, "run now", backing_off=False)
    return ctx.ops.edit(ctx.engine, job_id, run_now=True, note=ctx.note, actor=ctx.actor)


def _edit(ctx: ActionContext, job_id: str, **change: Any) -> object:
    return ctx.ops.edit(ctx.engine, job_id, note=ctx.note, actor=ctx.actor, **change)


def _set_priority(ctx: ActionContext, job_id: str) -> object:
    return _edit(ctx, job_id, priority=ctx.values["priority"])


def _run_later(ctx: ActionContext, job_id: str) -> object:
    moment = ctx.values["run_at"]
    return _edit(ctx, job_id, **({"delay": moment} if isinstance(moment, timedelta) else {"run_at": moment}))


def _edit_payload(ctx: ActionContext, job_id: str) -> object:
    return _edit(ctx, job_id, payload=ctx.values["payload"])


def _send_signal(ctx: ActionContext, job_id: str) -> object:
    name = ctx.values["name"]
    sent = ctx.ops.signal(ctx.engine, job_id, name, ctx.values["payload"])
    log.info("signal %r sent to job %s of queue %r by %s: %s", name, job_id, ctx.models.prefix, ctx.actor,
             sent.result)
    return f"signal {name} {sent.result}"


def _signal_values(form: Mapping[str, Any]) -> Mapping[str, Any]:
    return {"name": forms.text(form, "signal_name", required=True, limit=200),
            "payload": forms.json_field(form, "signal_payload")}


_PENDING, _CLAIMED = Status.PENDING.value, Status.CLAIMED.value

BUILTIN_ACTIONS: tuple[Action, ...] = (
    Action(name="requeue", label="Requeue", statuses=(Status.DEAD.value,), run=_requeue,
           help="dead → pending, visible now, failure count reset"),
    Action(name="kill", label="Kill", statuses=(_PENDING,), run=_kill, danger=True,
           help="pending → dead"),
    Action(name="release", label="Release", statuses=(_CLAIMED,), run=_release,
           help="claimed → pending (the worker's outcome is then discarded)"),
    Action(name="cancel", label="Cancel", statuses=(_PENDING, _CLAIMED), run=_cancel, danger=True,
           help="pending → dead now; a running job gets a cancel request its worker delivers at its next "
                "lease renewal, and ends dead when its handler returns"),
    Action(name="retry_now", label="Retry now", statuses=(_PENDING,), run=_retry_now,
           help="a pending job backing off after a failure becomes eligible now"),
    Action(name="run_now", label="Run now", statuses=(_PENDING,), run=_run_now,
           help="a pending job not yet eligible (scheduled, backing off) becomes eligible now"),
    Action(name="set_priority", label="Set priority", statuses=(_PENDING,), run=_set_priority,
           fields=("priority",), read=lambda form: {"priority": forms.priority(form)},
           help="a pending job's priority tier: 0 high, 1 normal, 2 low"),
    Action(name="run_later", label="Run later", statuses=(_PENDING,), run=_run_later,
           fields=("run_at",), read=lambda form: {"run_at": forms.when(form, "run_at")},
           help="a pending job runs at the given time (UTC without an offset) or after the given delay"),
    Action(name="edit_payload", label="Replace payload", statuses=(_PENDING,), run=_edit_payload,
           fields=("payload",), read=lambda form: {"payload": forms.payload(form)}, bulk=False,
           help="a pending job's payload, validated by its task's schema"),
    Action(name="send_signal", label="Send signal", statuses=(_PENDING, _CLAIMED), run=_send_signal,
           fields=("signal_name", "signal_payload"), read=_signal_values, bulk=False,
           help="queue.signal: a job waiting in ctx.wait_for(name) wakes with the JSON payload (empty: null); "
                "one not waiting yet keeps it for its wait"),
)
"""The operations the dashboard offers, each a queue operation (:class:`~venturi_sa.ops.face.Operations`):
requeue, kill, release, cancel, retry now, run now (``edit(run_now=True)``), set priority, run later,
replace payload (``edit``) and send signal (``signal``; who sent it is logged on ``venturi.web``)."""


BULK_BATCH = 100
"""The jobs one batch of an "all matching" request reads and changes."""
BULK_MOST = 2000
"""The most jobs one "all matching" request changes (the page says when more may match)."""
SHOWN_REASONS = 3
"""How many refusal reasons a summary spells out (the rest are counted)."""


@dataclass(kw_only=True)
class Outcome:
    """How a bulk action went: ids changed, ids skipped (with why), remarks, and whether more may match."""

    applied: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    remarks: dict[str, int] = field(default_factory=dict)
    truncated: bool = False
    failed: str | None = None
    """Set when the database failed: the job and the error; the jobs after it were not attempted."""

    def merge(self, other: Outcome) -> None:
        self.applied += other.applied
        self.skipped.update(other.skipped)
        for remark, n in other.remarks.items():
            self.remarks[remark] = self.remarks.get(remark, 0) + n
        self.truncated = self.truncated or other.truncated
        self.failed = self.failed or other.failed


def apply_each(action: Action, ctx: ActionContext, job_ids: Sequence[str]) -> Outcome:
    """Run ``action`` on each job in turn (one transaction each); refusals are skipped, not raised.

    A database error (the server gone, a timeout) rolls that job's transaction
    back and stops the walk: it is reported in ``failed``, the jobs done so far
    stay done and the rest are not attempted.
    """
    outcome = Outcome()
    for job_id in job_ids:
        try:
            result = action.run(ctx, job_id)
        except VenturiError as exc:
            outcome.skipped[job_id] = str(exc)
        except sa.exc.SQLAlchemyError as exc:
            reason = str(getattr(exc, "orig", None) or exc).strip().splitlines()[0]
            outcome.failed = f"the database failed on job {job_id}: {reason}"
            return outcome
        else:
            outcome.applied.append(job_id)
            if isinstance(result, str):
                outcome.remarks[result] = outcome.remarks.get(result, 0) + 1
    return outcome


def summary(label: str, outcome: Outcome) -> str:
    """One line: how many changed, each remark counted, the first refusals with their reason."""
    text = f"{label}: {len(outcome.applied)} job(s) changed"
    for remark, n in outcome.remarks.items():
        text += f" ({n} {remark})"
    if outcome.skipped:
        reasons = list(outcome.skipped.values())
        text += f"; {len(reasons)} refused: " + "; ".join(reasons[:SHOWN_REASONS])
        if len(reasons) > SHOWN_REASONS:
            text += f"; and {len(reasons) - SHOWN_REASONS} more"
    if outcome.failed:
        text += f"; stopped: {outcome.failed}"
    elif outcome.truncated:
        text += f"; stopped after {BULK_MOST}: run it again for the rest"
    return text


def registry(extra: Sequence[Action] = ()) -> dict[str, Action]:
    """The built-in actions plus ``extra`` by name; a name given twice is an error."""
    found: dict[str, Action] = {}
    for action in (*BUILTIN_ACTIONS, *extra):
        if action.name in found:
            raise ValueError(f"dashboard action {action.name!r} is registered twice")
        found[action.name] = action
    return found
