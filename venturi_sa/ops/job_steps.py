"""Signals to jobs and the durable records of a job: ``queue.signal``, ``queue.steps``, ``queue.signals``.

``signal`` locks the job row ``FOR KEY SHARE`` before it reads anything, so it
serializes with a suspended wait's outcome write (which locks the row
``FOR UPDATE`` first): a signal committed while the job is suspending still
wakes it.  That lock never holds back the lease renewal of a running job; it
holds back the job's outcome write until the caller's transaction ends.  Given a ``Session`` it runs in the
caller's transaction and never commits (the wake-up ``NOTIFY`` goes out on
that commit; a rollback delivers nothing); given an ``Engine`` it is one
short transaction of its own.  :func:`steps` and :func:`signals` read in a
short transaction of their own on an ``Engine``, or in the caller's given its
``Session`` or ``Connection`` (never committed there; see
:func:`venturi_sa.ops.transaction.reading`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session

from venturi_sa import payloads
from venturi_sa.errors import InvalidOption, InvalidTransition, SignalConflict, TooManySignals
from venturi_sa.models import Models
from venturi_sa.ops.history import job_not_found
from venturi_sa.ops.transaction import reading, short_transaction
from venturi_sa.storage import archive_reads
from venturi_sa.storage import signals as signal_store
from venturi_sa.storage import steps as step_store
from venturi_sa.storage.durable_params import StepInfo as StepInfo  # the public record (venturi_sa.StepInfo)
from venturi_sa.storage.params import Runner
from venturi_sa.storage.signals import SignalCaps, SignalResult

DEFAULT_MAX_SIGNALS = 1000
"""``Queue(max_signals_per_job=...)``'s default: the most signals (distinct names) one job keeps."""
DEFAULT_MAX_SIGNAL_BYTES = 16 * 1024 * 1024
"""``Queue(max_signal_bytes_per_job=...)``'s default: 16 MiB of signal payloads per job, in all."""
DEFAULT_CAPS = SignalCaps(DEFAULT_MAX_SIGNALS, DEFAULT_MAX_SIGNAL_BYTES)


def check_caps(count: object, total_bytes: object) -> SignalCaps:
    """The per-job signal caps; ``InvalidOption`` unless both are integers from 1 to 2**31 - 1."""
    return SignalCaps(_cap(count, "max_signals_per_job"), _cap(total_bytes, "max_signal_bytes_per_job"))


def _cap(value: object, what: str) -> int:
    most = 2**31 - 1
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= most:
        raise InvalidOption(f"{what} must be an integer from 1 to {most}, got {value!r:.80}")
    return value


@dataclass(frozen=True)
class Signalled:
    """What ``queue.signal`` did: ``"woke"`` (the job waited for it and is claimable now), ``"stored"``
    (kept for a wait not reached yet) or ``"duplicate"`` (the same name and payload were sent before)."""

    job_id: str
    name: str
    result: str

    def as_dict(self) -> dict[str, Any]:
        return {"job_id": self.job_id, "name": self.name, "result": self.result}


@dataclass(frozen=True)
class SignalInfo:
    """One signal sent to a job."""

    name: str
    payload: Any
    sent_at: datetime

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "payload": self.payload, "sent_at": self.sent_at.isoformat()}


@dataclass(frozen=True)
class TimelineRow:
    """One line of a job's steps interleaved with its journal (``jobs show``, the dashboard's job page)."""

    at: datetime
    run_no: int
    entry: str  # "step", "sleep", "wait" or "journal"
    name: str  # the step's name, or the journal entry's outcome
    took: timedelta | None  # a step's duration
    detail: str | None  # a step's result, a sleep's wake time, a wait's state, a journal note


def _step_detail(step: StepInfo) -> str:
    if step.entry == "step":
        return json.dumps(step.result)
    until = step.wake_at.isoformat() if step.wake_at is not None else "no timeout"
    if step.entry == "sleep":
        return f"wakes at {until}"
    if step.resolution is None:
        return f"waiting until {until}"
    return f"signal: {json.dumps(step.result)}" if step.resolution == "signal" else "timed out"


def timeline(journal: Sequence[Any], steps: Sequence[StepInfo]) -> list[TimelineRow]:
    """Journal entries (``recorded_at``, ``run_no``, ``outcome``, ``note``) and steps, in time order."""
    rows: list[tuple[datetime, int, TimelineRow]] = []
    for e in journal:
        rows.append((e.recorded_at, 1, TimelineRow(e.recorded_at, e.run_no, "journal", e.outcome, None, e.note)))
    for s in steps:
        took = (s.finished_at - s.started_at) if s.finished_at is not None and s.entry == "step" else None
        rows.append((s.started_at, 0, TimelineRow(s.started_at, s.run_no, s.entry, s.name, took, _step_detail(s))))
    return [row for _, _, row in sorted(rows, key=lambda r: (r[0], r[1]))]


def _check_name(name: object) -> str:
    if not isinstance(name, str) or not name.strip() or "\x00" in name or len(name) > 200:
        raise InvalidOption(f"a signal name must be a non-empty string of at most 200 characters without NUL, "
                            f"got {name!r:.80}")
    return name


def signal_in(models: Models, runner: Runner, job_id: str, name: str, payload: Any,
              max_bytes: int = payloads.DEFAULT_MAX_PAYLOAD_BYTES, caps: SignalCaps = DEFAULT_CAPS) -> Signalled:
    """Send one signal in ``runner``'s transaction (see :func:`signal`)."""
    _check_name(name)
    stored = payloads.ensure_json(payload, "signal payload", max_bytes)
    outcome = signal_store.send(models, runner, job_id, name, stored, caps)
    result = outcome.result
    if result is SignalResult.NOT_FOUND:
        status = archive_reads.archived_status(models, runner, job_id)
        if status is not None:
            raise InvalidTransition(f"cannot signal job {job_id}: it is already {status} (archived)")
        raise job_not_found(models, job_id)
    if result is SignalResult.TERMINAL:
        raise InvalidTransition(f"cannot signal job {job_id}: it is already {outcome.status}")
    if result is SignalResult.CONFLICT:
        raise SignalConflict(f"job {job_id} already has signal {name!r} with another payload: the first "
                             "signal of a name wins; nothing was written")
    if result is SignalResult.FULL:
        count, total = outcome.held
        raise TooManySignals(f"job {job_id} holds {count} signals of {total} bytes: signal {name!r} would pass "
                             f"its cap of {caps.count} signals or {caps.total_bytes} bytes (max_signals_per_job, "
                             "max_signal_bytes_per_job); nothing was written")
    if result is SignalResult.TIMED_OUT:
        raise InvalidTransition(f"cannot signal job {job_id}: its wait for {name!r} timed out (its deadline "
                                f"has come)")
    return Signalled(job_id, name, result.value)


def signal(models: Models, bind: sa.Engine | Session, job_id: str, name: str, payload: Any = None,
           max_bytes: int = payloads.DEFAULT_MAX_PAYLOAD_BYTES, caps: SignalCaps = DEFAULT_CAPS) -> Signalled:
    """Send signal ``name`` (with a JSON ``payload``) to a job; the job's ``ctx.wait_for(name)`` returns it."""
    if isinstance(bind, Session):
        return signal_in(models, bind, job_id, name, payload, max_bytes, caps)
    with short_transaction(models, bind) as session:
        return signal_in(models, session, job_id, name, payload, max_bytes, caps)


def steps(models: Models, bind: sa.Engine | Runner, job_id: str) -> list[StepInfo]:
    """The job's recorded steps, sleeps and waits in the order first reached (an archived job's too).

    ``JobNotFound`` if the job is neither live nor archived.  ``bind``: see
    :func:`~venturi_sa.ops.transaction.reading`.
    """
    with reading(models, bind) as session:
        records = step_store.read(models, session, job_id)
        if records or step_store.job_exists(models, session, job_id):
            return records
        kept = _archived(models, session, job_id, models.steps_table, ("started_at", "name"))
    return [StepInfo(r.name, r.entry, r.result, r.run_no, r.started_at, r.finished_at, r.wake_at, r.resolution)
            for r in kept]


def signals(models: Models, bind: sa.Engine | Runner, job_id: str) -> list[SignalInfo]:
    """The signals sent to the job, oldest first (an archived job's too); ``JobNotFound`` if no such job.

    ``bind``: see :func:`~venturi_sa.ops.transaction.reading`.
    """
    with reading(models, bind) as session:
        records: Sequence[Any] = signal_store.read(models, session, job_id)
        if not records and not step_store.job_exists(models, session, job_id):
            records = _archived(models, session, job_id, models.signals_table, ("sent_at", "name"))
    return [SignalInfo(r.name, r.payload, r.sent_at) for r in records]


def _archived(models: Models, runner: Runner, job_id: str, table: sa.Table, order: Sequence[str]) -> list[Any]:
    kept = archive_reads.kept_rows(models, runner, job_id, table, order)
    if kept is None:
        raise job_not_found(models, job_id)
    return kept
