"""Why isn't it running?  The concrete reasons, read from the database, for one job.

:func:`explain` reads in one short read-only transaction (REPEATABLE READ,
so every fact comes from one snapshot) and changes nothing; given the
caller's ``Session`` or ``Connection`` it reads in that transaction instead,
at its isolation level, and never commits it.  Each reason is
a code plus a sentence: for a pending job any of ``waiting_on_parents``, ``scheduled``,
``backoff``, ``sleeping`` / ``waiting_for_signal`` (a durable sleep or wait,
until when), ``paused`` (by the kind's own pause, a kind pattern or the
whole queue's), ``no_worker`` (a job due now, but no job of its kind is
claimed now or finished within ``activity_window``, and this job's own last
run is older: a heuristic, since workers keep no heartbeat), ``behind`` (eligible jobs a
claim takes first), ``limited`` (a limit in force is full or used up:
named with its current use, docs/limits.md), ``limits_unknown`` (the
explaining queue has no task code for the kind, so a limit its task
declares may hold the job: only overrides were checked) and ``eligible``;
``claimed`` (by whom, lease until when, and ``cancel_requested``);
``dead`` (the last journal note) or ``completed``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa

from venturi_sa.models import Models
from venturi_sa.ops import dependents as workflow
from venturi_sa.ops import limit_reasons
from venturi_sa.ops.history import job_not_found
from venturi_sa.ops.records import jsonable
from venturi_sa.ops.transaction import reading
from venturi_sa.states import Outcome, Status
from venturi_sa.storage import archive_reads
from venturi_sa.storage import explain as explain_store
from venturi_sa.storage import history as history_store
from venturi_sa.storage import steps as step_store
from venturi_sa.storage.durable_params import StepInfo
from venturi_sa.storage.explain import ExplainFacts
from venturi_sa.storage.history import JobParams
from venturi_sa.storage.infinite_times import aware
from venturi_sa.storage.params import Runner
from venturi_sa.storage.pauses import ALL_KINDS
from venturi_sa.task import Registry

ACTIVITY_WINDOW = timedelta(minutes=10)


@dataclass(frozen=True)
class Reason:
    code: str
    text: str
    until: datetime | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"code": self.code, "text": self.text, "until": jsonable(self.until)}


@dataclass(frozen=True)
class Explanation:
    """The job's status and the reasons it is (not) running, most decisive first.

    ``timeout`` is the job's own time limit (an enqueue's ``timeout=``), None
    if its task's ``Task.timeout`` applies.
    """

    job_id: str
    kind: str
    status: str
    reasons: list[Reason] = field(default_factory=list)
    timeout: timedelta | None = None

    @property
    def codes(self) -> list[str]:
        return [r.code for r in self.reasons]

    def as_dict(self) -> dict[str, Any]:
        return {"job_id": self.job_id, "kind": self.kind, "status": self.status,
                "reasons": [r.as_dict() for r in self.reasons], "timeout": jsonable(self.timeout)}

    def __str__(self) -> str:
        head = f"job {self.job_id} ({self.kind}) is {self.status}"
        limit = [] if self.timeout is None else [
            f"  time limit: {self.timeout.total_seconds():g}s (set at enqueue; overrides Task.timeout)"]
        return "\n".join([head, *(f"  - {r.text}" for r in self.reasons), *limit])


def explain(models: Models, bind: sa.Engine | Runner, job_id: str,
            activity_window: timedelta = ACTIVITY_WINDOW, registry: Registry | None = None) -> Explanation:
    """Why job ``job_id`` is not running (or what it is doing); ``JobNotFound`` if there is none.

    Its own time limit is read through the job view (``get_job``'s statement),
    in the same snapshot as the facts.  Given the caller's ``Session`` or
    ``Connection`` it reads in that transaction, at its isolation level (see
    :func:`~venturi_sa.ops.transaction.reading`).
    """
    with reading(models, bind, isolation="REPEATABLE READ") as session:
        view = history_store.fetch_job_view(models, session, JobParams(job_id=job_id))
        facts = (explain_store.explain_facts(models, session, job_id, activity_window=activity_window)
                 if view is not None else None)
        waiting = workflow.waiting_text(models, session, job_id) if view is not None else None
        job_row = facts.job if facts is not None else None
        held = (step_store.suspension(models, session, job_id)
                if job_row is not None and facts is not None and facts.now is not None
                and job_row.status == Status.PENDING.value and aware(job_row.visible_at) > facts.now else None)
        limited = limit_reasons.held(models, session, registry, facts.job if facts is not None else None)
        if view is None:  # terminal and moved to the archive: it is not running because it ended
            view = archive_reads.fetch_job_view(models, session, job_id)
            if view is not None:
                return Explanation(job_id=view.id, kind=view.kind, status=view.status, timeout=view.timeout,
                                   reasons=_archived(view, archive_reads.fetch_journal(models, session, job_id)))
    if view is None or facts is None or facts.job is None:
        raise job_not_found(models, job_id)
    job = facts.job
    due = (job.status == Status.PENDING.value and waiting is None and facts.now is not None
           and aware(job.visible_at) <= facts.now)
    reasons = [Reason("limited", text) for text in limited if due] + [
        r for r in _reasons(facts, activity_window, held) if not (limited and due and r.code == "eligible")]
    if due and (registry is None or job.kind not in registry):
        reasons = [*(r for r in reasons if r.code != "eligible"), Reason("limits_unknown", unknown_text(job.kind))]
    if waiting is not None and job.status == Status.PENDING.value:  # 'infinity' is not a schedule
        reasons = [Reason("waiting_on_parents", waiting), *(r for r in reasons if r.code != "scheduled")]
    return Explanation(job_id=job.id, kind=job.kind, status=job.status, reasons=reasons, timeout=view.timeout)


def unknown_text(kind: str) -> str:
    """The ``limits_unknown`` sentence: no task code for ``kind`` here, so its declared limits are not known."""
    return (f"declared limits unknown: no task code for kind {kind!r} here (run with --app, or ask the app's "
            "queue); no overridden limit holds it")


def _reasons(facts: ExplainFacts, window: timedelta, held: StepInfo | None = None) -> list[Reason]:
    job = facts.job
    assert job is not None
    if job.status == Status.CLAIMED.value:
        return _claimed(facts)
    if job.status == Status.DEAD.value:
        note = facts.last_entry.note if facts.last_entry is not None else None
        return [Reason("dead", f"dead since {job.finished_at.isoformat()}: {note or 'no journal note'}")]
    if job.status == Status.COMPLETED.value:
        return [Reason("completed", f"completed at {job.finished_at.isoformat()}")]
    return _pending(facts, window, held)


def suspended_reason(held: StepInfo) -> Reason:
    """``waiting_for_signal`` (its name, until its deadline) or ``sleeping`` (until its wake time)."""
    until = f"until {held.wake_at.isoformat()}" if held.wake_at is not None else "with no timeout"
    if held.entry == "wait":
        return Reason("waiting_for_signal", f"waiting for signal {held.name!r} {until}", until=held.wake_at)
    return Reason("sleeping", f"sleeping ({held.name}) {until}", until=held.wake_at)


def _archived(view: Any, journal: Sequence[Any]) -> list[Reason]:
    """The reason of a job in the archive: it ended (its last journal note, if dead)."""
    if view.status == Status.DEAD.value:
        note = journal[-1].note if journal else None
        return [Reason("dead", f"dead since {view.finished_at.isoformat()} (archived): {note or 'no journal note'}")]
    return [Reason("completed", f"completed at {view.finished_at.isoformat()} (archived)")]


def _claimed(facts: ExplainFacts) -> list[Reason]:
    job = facts.job
    assert job is not None
    expires = job.claim_expires_at
    state = "expired" if facts.now is not None and expires < facts.now else "expires"
    reasons = [Reason("claimed", f"claimed by {job.claimed_by} (run {job.run_count}); its lease {state} "
                                 f"at {expires.isoformat()}", until=expires)]
    if facts.cancel is not None:
        note = f": {facts.cancel.note}" if facts.cancel.note else ""
        reasons.append(Reason("cancel_requested", f"cancel requested by {facts.cancel.actor} at "
                                                  f"{facts.cancel.created_at.isoformat()}{note}"))
    return reasons


def _pending(facts: ExplainFacts, window: timedelta, held: StepInfo | None = None) -> list[Reason]:
    job = facts.job
    assert job is not None and facts.now is not None
    reasons = []
    if aware(job.visible_at) > facts.now:
        last = facts.last_entry
        if held is not None:
            reasons.append(suspended_reason(held))
        elif last is not None and last.outcome == Outcome.RETRIED.value and job.failure_count > 0:
            reasons.append(Reason("backoff", f"in backoff after failure {job.failure_count} "
                                             f"({last.note or 'no note'}) until {job.visible_at.isoformat()}",
                                  until=job.visible_at))
        else:
            reasons.append(Reason("scheduled", f"scheduled for {job.visible_at.isoformat()}", until=job.visible_at))
    if facts.pause is not None:
        pause = facts.pause
        what = f"kind {job.kind!r} is paused"
        if pause.kind == ALL_KINDS:
            what = "the whole queue is paused"
        elif pause.kind != job.kind:
            what = f"kind {job.kind!r} is paused by the pattern {pause.kind!r}"
        until = f" until {pause.resume_at.isoformat()}" if pause.resume_at is not None else " until resumed"
        reasons.append(Reason("paused", f"{what} by {pause.actor} since {pause.paused_at.isoformat()}"
                                        f" ({pause.reason or 'no reason given'}){until}", until=pause.resume_at))
    last = facts.last_entry
    ran_lately = last is not None and last.run_no > 0 and last.recorded_at > facts.now - window
    due = aware(job.visible_at) <= facts.now  # a job not due yet needs no worker now
    if due and not facts.recent_activity and not ran_lately:
        reasons.append(Reason("no_worker", f"no job of kind {job.kind!r} was claimed or finished in the last "
                                           f"{window.total_seconds() / 60:g} min: is a worker running this kind?"))
    if facts.ahead:
        more = "at least " if facts.ahead_capped else ""
        reasons.append(Reason("behind", f"behind {more}{facts.ahead} eligible {job.kind!r} job(s) of higher "
                                        "priority or older"))
    if not reasons:
        reasons.append(Reason("eligible", "eligible now: the next claim with a free slot takes it"))
    return reasons
