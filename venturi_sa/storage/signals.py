"""Signals sent to jobs (``queue.signal``): rows of ``<prefix>_signals``, in the caller's transaction.

The job row is locked ``FOR KEY SHARE`` before anything is read.  A
suspended wait's outcome write locks the row ``FOR UPDATE`` (a statement
of its own, ``storage/outcomes.py``) before it looks for stored signals
(``storage.steps.suspend_wait``), and the two locks conflict, so they
serialize: whichever commits second sees the other's row, and the job is
woken either way.  ``FOR KEY SHARE`` does not conflict with the lease
renewal of a running job, so a signal sent in a long transaction never
costs the run its lease; it holds back the job's outcome write (and the
claim of a pending job) until the caller's transaction ends.
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from venturi_sa.models import Models
from venturi_sa.states import Status
from venturi_sa.storage import drivers
from venturi_sa.storage.params import Runner

NOW = sa.func.clock_timestamp


class SignalResult(enum.Enum):
    WOKE = "woke"  # stored, and the job, waiting for it, is claimable now
    STORED = "stored"  # stored for a wait not reached yet (or a running job)
    DUPLICATE = "duplicate"  # the same name and payload were stored before: nothing changed
    NOT_FOUND = "not found"
    TERMINAL = "terminal"
    CONFLICT = "conflict"  # another payload is stored under that name
    TIMED_OUT = "timed out"  # the job's wait of that name timed out, or its deadline has come: too late
    FULL = "full"  # storing it would pass the job's signal count or bytes cap


@dataclass(frozen=True)
class SignalCaps:
    """The most signals one job keeps, and the most bytes of their payloads (as PostgreSQL's text of the JSON)."""

    count: int
    total_bytes: int


@dataclass(frozen=True)
class SignalOutcome:
    result: SignalResult
    status: str | None = None  # the job's status as found
    kind: str | None = None
    held: tuple[int, int] = (0, 0)  # FULL: the signals and payload bytes the job holds already


@dataclass(frozen=True)
class SignalRecord:
    """One signal sent to a job."""

    name: str
    payload: Any
    sent_at: datetime


def send(models: Models, runner: Runner, job_id: str, name: str, payload: Any, caps: SignalCaps) -> SignalOutcome:
    """Lock the job, then store the signal and wake the job if it waits for it; the caller commits.

    The wake-up ``NOTIFY`` goes out with the caller's commit (a rollback
    sends nothing).  Nothing is written for a duplicate, a conflict, an
    unknown or terminal job, a signal past ``caps`` (counted over the job's
    signals this transaction sees: concurrent senders may each pass once), or a wait that already timed out or whose
    deadline has come on the database clock (at or after it; the next run
    resolves that wait ``timeout`` even if no run has reached it since).
    """
    job = models.jobs_table.c
    row = runner.execute(sa.select(job.status, job.kind).where(job.id == job_id)
                         .with_for_update(read=True, key_share=True)).first()
    if row is None:
        return SignalOutcome(SignalResult.NOT_FOUND)
    if Status(row.status).terminal:
        return SignalOutcome(SignalResult.TERMINAL, row.status, row.kind)
    s, c = models.signals_table.c, models.steps_table.c
    stored = runner.execute(sa.select(s.payload).where(s.job_id == job_id, s.name == name)).first()
    if stored is not None:
        same = stored.payload == payload and json.dumps(stored.payload, sort_keys=True) == json.dumps(
            payload, sort_keys=True)
        return SignalOutcome(SignalResult.DUPLICATE if same else SignalResult.CONFLICT, row.status, row.kind)
    overdue = sa.func.coalesce(c.wake_at <= NOW(), False)  # its deadline has come, on the database clock
    wait = runner.execute(sa.select(c.resolution, overdue.label("overdue")).where(
        c.job_id == job_id, c.name == name, c.entry == "wait")).first()
    if wait is not None and (wait.resolution == "timeout" or (wait.resolution is None and wait.overdue)):
        return SignalOutcome(SignalResult.TIMED_OUT, row.status, row.kind)
    document = sa.cast(sa.literal(json.dumps(payload), sa.Text), postgresql.JSONB)
    held = runner.execute(sa.select(
        sa.func.count(), sa.func.coalesce(sa.func.sum(sa.func.octet_length(sa.cast(s.payload, sa.Text))), 0),
        sa.func.octet_length(sa.cast(document, sa.Text))).where(s.job_id == job_id)).one()
    count, total, size = int(held[0]), int(held[1]), int(held[2])
    if count + 1 > caps.count or total + size > caps.total_bytes:
        return SignalOutcome(SignalResult.FULL, row.status, row.kind, (count, total))
    runner.execute(sa.insert(models.signals_table).values(job_id=job_id, name=name, sent_at=NOW(), payload=document))
    if row.status != Status.PENDING.value or wait is None or wait.resolution is not None:
        return SignalOutcome(SignalResult.STORED, row.status, row.kind)
    runner.execute(sa.update(models.jobs_table).where(job.id == job_id, job.status == Status.PENDING.value)
                   .values(visible_at=NOW()))
    runner.execute(drivers.notify_statement(models.names.channel, row.kind))
    return SignalOutcome(SignalResult.WOKE, row.status, row.kind)


def read(models: Models, runner: Runner, job_id: str) -> list[SignalRecord]:
    """The signals sent to ``job_id``, oldest first."""
    s = models.signals_table.c
    rows = runner.execute(sa.select(s.name, s.payload, s.sent_at).where(s.job_id == job_id)
                          .order_by(s.sent_at, s.name)).all()
    return [SignalRecord(r.name, r.payload, r.sent_at) for r in rows]
