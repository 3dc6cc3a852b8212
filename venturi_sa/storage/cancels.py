"""Cancel requests: a pending job ends ``dead`` now, a claimed one gets a durable request its worker reads.

Every verb runs in the caller's transaction and never commits.  The job's
row is locked first (:func:`hold`) and its status read under the lock.  A
running job (claimed, lease not expired) is locked ``FOR KEY SHARE`` and
gets its request under that lock: it waits for an outcome write in progress
(which locks the row ``FOR UPDATE`` first) and holds the next one back until
the caller's transaction ends, but never the run's lease renewal, so a
cancel in a long transaction cannot cost the run its lease.  A job to end
now (pending, or its lease expired) is locked ``FOR UPDATE`` (waiting for
``after=`` enqueues naming it) before the change is written with the
expected status repeated in the ``WHERE`` clause together with its journal
row (``storage.admin.guarded_write``), so a worker's fenced outcome write,
a claim and a cancel of the same job serialize: exactly one of them wins.
A request is a row of ``<prefix>_cancels``: the holding worker's lease
renewal reads it (``storage/leases.py``); one its run
never read is applied by the run's outcome write (``storage/outcomes.py``) or
by recovery (``storage/recovery.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from venturi_sa.models import Models
from venturi_sa.states import Outcome, Status
from venturi_sa.storage import drivers
from venturi_sa.storage.admin import guarded_write, lock_statement
from venturi_sa.storage.params import Runner
from venturi_sa.storage.timestamps import moment

CANCEL_PAYLOAD = "venturi:cancel"
"""The ``NOTIFY`` payload that asks listening workers to renew (and so read cancel requests) now."""


@dataclass(frozen=True, kw_only=True)
class CancelParams:
    job_id: str
    actor: str
    note: str | None = None


@dataclass(frozen=True, kw_only=True)
class CancelResult:
    """``job`` as found (None: no such job); ``done``: a pending job ended ``dead`` now;
    ``requested``: a claimed job's run got a cancel request (or already had one)."""

    job: sa.Row[Any] | None
    done: bool = False
    requested: bool = False


def cancel_note(actor: str, note: str | None, running: bool = False) -> str:
    head = f"cancelled by {actor}" + (" while running" if running else "")
    return f"{head}: {note}" if note else head


def cancel(models: Models, runner: Runner, params: CancelParams) -> CancelResult:
    """Lock the job; a pending one ends ``dead`` now (journaled), a claimed one gets a durable cancel request.

    A claimed job whose lease has expired (its worker is gone) ends ``dead``
    now too: a late outcome of that worker finds its fence broken.

    The request (the first one wins; later ones change nothing) is read by
    the holding worker's next lease renewal; a ``NOTIFY`` sent on commit
    asks listening workers to renew at once.  A terminal job is left as it is.
    """
    current = hold(models, runner, params.job_id)
    if current is None:
        return CancelResult(job=None)
    if current.status == Status.PENDING.value:
        return CancelResult(job=_end_now(models, runner, params, Status.PENDING) or current, done=True)
    if current.status != Status.CLAIMED.value:
        return CancelResult(job=current)
    if _expired(runner, current):  # its worker is gone: end it now; a late write is fenced out
        return CancelResult(job=_end_now(models, runner, params, Status.CLAIMED, "lease expired") or current,
                            done=True)
    runner.execute(
        postgresql.insert(models.CancelRequest)
        .values(job_id=current.id, run_no=current.run_count, actor=params.actor, note=params.note,
                created_at=sa.func.now())
        .on_conflict_do_nothing(index_elements=["job_id"])
    )
    runner.execute(drivers.notify_statement(models.names.channel, CANCEL_PAYLOAD))
    return CancelResult(job=current, requested=True)


HOLD_TRIES = 5
"""How often :func:`hold` takes the other lock when the job changed between its read and its lock."""


def hold(models: Models, runner: Runner, job_id: str) -> sa.Row[Any] | None:
    """Lock the job for a cancel until the caller's transaction ends; the row as locked (None: no such job).

    A running job (claimed, its lease not expired) is locked ``FOR KEY
    SHARE``: its outcome write waits for the caller's commit (it locks ``FOR
    UPDATE`` first), its lease renewal does not.  Any other job is locked
    ``FOR UPDATE``: it is not claimed, recovered or written meanwhile, and
    the ``after=`` enqueues naming it have committed (its settle sees their
    dependency rows).  The strength is chosen from an unlocked read and the
    lock taken in a savepoint: if the job changed in between, the savepoint
    is rolled back (which drops the lock, so no lock is ever upgraded, and
    two cancels cannot deadlock on one row) and the other lock is taken.
    """
    row = None
    for _ in range(HOLD_TRIES):
        row = runner.execute(lock_statement(models, job_id, lock=False)).first()
        if row is None:
            return None
        running = _running(runner, row)
        savepoint = _connection(runner).begin_nested()
        row = runner.execute(lock_statement(models, job_id, key_share=running)).first()
        if row is None or _running(runner, row) == running:
            savepoint.commit()
            return row
        savepoint.rollback()
    return runner.execute(lock_statement(models, job_id)).first()  # it kept changing: take the stronger lock


def _connection(runner: Runner) -> sa.Connection:
    """The Core connection of ``runner``: a savepoint on it fires none of the application's session events."""
    return runner if isinstance(runner, sa.Connection) else runner.connection()


def _running(runner: Runner, row: sa.Row[Any]) -> bool:
    return row.status == Status.CLAIMED.value and not _expired(runner, row)


def _expired(runner: Runner, row: sa.Row[Any]) -> bool:
    """A claimed job's lease has expired unrenewed (by the database clock)."""
    if row.status != Status.CLAIMED.value:
        return False
    return bool(runner.execute(sa.select(sa.func.now() > moment(row.claim_expires_at))).scalar_one())


def _end_now(models: Models, runner: Runner, params: CancelParams, status: Status,
             why: str | None = None) -> sa.Row[Any] | None:
    """``status`` -> ``dead`` now, journaled ``dead`` with the cancel note; None if the status guard failed."""
    note = cancel_note(params.actor, params.note)
    values = {"status": Status.DEAD.value, "finished_at": sa.func.clock_timestamp(), "claimed_by": None,
              "claim_expires_at": None}
    return guarded_write(models, runner, params.job_id, status, values, Outcome.DEAD,
                         f"{note} ({why})" if why else note, params.actor)


def clear_cancel(models: Models, runner: Runner, job_id: str) -> None:
    """Forget a job's cancel request (a requeued job starts afresh)."""
    request = models.CancelRequest
    runner.execute(sa.delete(request).where(request.job_id == job_id).execution_options(synchronize_session=False))


def cancel_request(models: Models, runner: Runner, job_id: str) -> sa.Row[Any] | None:
    request = models.CancelRequest
    columns: list[Any] = [request.run_no, request.actor, request.note, request.created_at]
    return runner.execute(sa.select(*columns).where(request.job_id == job_id)).first()


def non_terminal_ids(models: Models, runner: Runner, *, kind: str, limit: int) -> list[str]:
    """Ids of up to ``limit`` pending or claimed jobs of ``kind``, oldest first (for a cancel by filter)."""
    job = models.Job
    return list(runner.execute(
        sa.select(job.id).where(job.kind == kind, job.status.in_([Status.PENDING.value, Status.CLAIMED.value]))
        .order_by(job.created_at, job.id).limit(limit)).scalars())
