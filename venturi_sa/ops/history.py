"""Reading a queue's history: one job, its journal timeline, its result, and keyset-paged listings.

Every function opens one short read-only transaction on the engine (see
:mod:`venturi_sa.ops.transaction`; :func:`get_job` and :func:`result_state`
given the caller's ``Session`` or ``Connection`` read in its transaction
instead, never committing it) and takes no locks, so it never waits on
a worker or blocks one.  What it returns is a snapshot: the rows may change
as soon as the transaction ends.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import time
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from venturi_sa.errors import InvalidOption, JobNotCompleted, JobNotFound
from venturi_sa.models import Models
from venturi_sa.ops.checks import aware, statuses
from venturi_sa.ops.records import FireInfo, JobInfo, JobView, JournalInfo, Page, job_view_info
from venturi_sa.ops.transaction import reading, short_transaction
from venturi_sa.states import STATUSES, Status
from venturi_sa.storage import archive_reads
from venturi_sa.storage import history as history_store
from venturi_sa.storage import schedules as schedules_store
from venturi_sa.storage.history import HistoryParams, JobParams
from venturi_sa.storage.params import Runner
from venturi_sa.storage.schedules import FireOfParams

MAX_PAGE = 1000
"""The largest history page one call returns."""


def job_not_found(models: Models, job_id: str) -> JobNotFound:
    """The error for a job id the queue does not hold (never existed, or cleaned up)."""
    return JobNotFound(f"no job with id {job_id!r} in queue {models.prefix!r}")


def get_job(models: Models, bind: sa.Engine | Runner, job_id: str) -> JobView:
    """The job's current row with ``fired_by`` (the schedule fire that inserted it) and ``timeout`` (its own
    time limit), all read in one statement; raises ``JobNotFound`` if there is no such job.  ``bind``: see
    :func:`~venturi_sa.ops.transaction.reading`."""
    with reading(models, bind) as session:
        row = history_store.fetch_job_view(models, session, JobParams(job_id=job_id))
        row = row if row is not None else archive_reads.fetch_job_view(models, session, job_id)
    if row is None:
        raise job_not_found(models, job_id)
    return job_view_info(row)


def fired_by(models: Models, engine: sa.Engine, job_id: str) -> FireInfo | None:
    """The schedule and fire time that inserted job ``job_id`` (one ``_fires_job`` index lookup).

    None if no schedule inserted it, or there is no such job: use
    :func:`get_job` (its ``fired_by``) to tell those apart.
    """
    with short_transaction(models, engine) as session:
        row = schedules_store.fire_of(models, session, FireOfParams(job_id=job_id))
    return FireInfo(schedule=row.schedule, fire_at=row.fire_at, fired_at=row.fired_at) if row else None


def journal(models: Models, engine: sa.Engine, job_id: str) -> list[JournalInfo]:
    """The job's journal, oldest entry first; ``JobNotFound`` if the job does not exist.

    The entries and the existence check are read in the same transaction.
    Which schedule fire inserted the job is not a journal entry (the seed
    journal's outcomes are the runs' and the operators'): it is the job's
    ``fired_by`` (:func:`get_job`, :func:`fired_by`).
    """
    params = JobParams(job_id=job_id)
    with short_transaction(models, engine) as session:
        rows = history_store.fetch_journal(models, session, params)
        if not rows and history_store.fetch_job(models, session, params) is None:
            rows = archive_reads.fetch_journal(models, session, job_id)
            if not rows and archive_reads.fetch_job(models, session, job_id) is None:
                raise job_not_found(models, job_id)
    return [JournalInfo(**r._mapping) for r in rows]


# -- job results ------------------------------------------------------------------------

RESULT_POLL = 0.05
"""Seconds between reads of the job row while ``result(..., wait=...)`` waits."""


def check_wait(wait: object) -> float | None:
    """``wait`` as seconds (None: do not wait); anything but a finite number >= 0 raises ``InvalidOption``."""
    if wait is None:
        return None
    if isinstance(wait, bool) or not isinstance(wait, (int, float)) or not math.isfinite(wait) or wait < 0:
        raise InvalidOption(f"result wait must be None or a number of seconds >= 0, got {wait!r}")
    return float(wait)


def result_state(models: Models, bind: sa.Engine | Runner, job_id: str) -> tuple[str, Any]:
    """One read of ``(status, result)`` (``bind``: see :func:`~venturi_sa.ops.transaction.reading`);
    raises ``JobNotFound`` if there is no such job."""
    with reading(models, bind) as session:
        row = history_store.fetch_result(models, session, JobParams(job_id=job_id))
        row = row if row is not None else archive_reads.fetch_result(models, session, job_id)
    if row is None:
        raise job_not_found(models, job_id)
    return row.status, row.result


def settled(models: Models, job_id: str, state: tuple[str, Any], waiting: bool) -> bool:
    """True if ``state`` is completed; raises ``JobNotCompleted`` if it is dead, or not completed and not waiting."""
    status = state[0]
    if status == Status.COMPLETED.value:
        return True
    if status == Status.DEAD.value or not waiting:
        raise JobNotCompleted(
            f"job {job_id!r} in queue {models.prefix!r} is {status}, not completed: it has no result"
            + ("" if status == Status.DEAD.value else " yet (pass wait=seconds to wait for it)"), status)
    return False


def timed_out(models: Models, job_id: str, wait: float, status: str) -> TimeoutError:
    return TimeoutError(f"job {job_id!r} in queue {models.prefix!r} is still {status} after {wait:g}s")


def result(models: Models, engine: sa.Engine, job_id: str, wait: float | None = None) -> Any:
    """The completed job's result: the attachment of its last ``completed`` journal row.

    Raises ``JobNotFound`` for no such job and ``JobNotCompleted`` (naming the
    status) for a job that is not completed.  With ``wait`` seconds it reads
    the job row every ``RESULT_POLL`` seconds, each in its own short
    transaction, until the job is completed (or ``dead``: ``JobNotCompleted``
    at once), and raises ``TimeoutError`` when ``wait`` runs out.
    """
    limit = check_wait(wait)
    deadline = time.monotonic() + (limit or 0.0)
    while True:
        state = result_state(models, engine, job_id)
        if settled(models, job_id, state, waiting=limit is not None):
            return state[1]
        left = deadline - time.monotonic()
        if left <= 0:
            raise timed_out(models, job_id, limit or 0.0, state[0])
        time.sleep(min(RESULT_POLL, left))


# -- history cursors ------------------------------------------------------------------

_BAD_CURSOR = "invalid history cursor {!r}: pass a next_cursor exactly as a previous page returned it"


def encode_cursor(created_at: datetime, job_id: str) -> str:
    """An opaque cursor: urlsafe base64 of ``[created_at ISO 8601, id]``."""
    raw = json.dumps([created_at.isoformat(), job_id], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[datetime, str]:
    """Inverse of :func:`encode_cursor`; a malformed cursor raises ``InvalidOption``."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        created, job_id = json.loads(raw)
        when = datetime.fromisoformat(created)
    except (binascii.Error, ValueError, TypeError, UnicodeDecodeError) as exc:
        raise InvalidOption(_BAD_CURSOR.format(cursor)) from exc
    if when.tzinfo is None or not isinstance(job_id, str):
        raise InvalidOption(_BAD_CURSOR.format(cursor))
    return when, job_id


# -- history listing ----------------------------------------------------------------------

def history(models: Models, engine: sa.Engine, *, status: str | Sequence[str] | None = None,
            kind: str | None = None, finished_after: datetime | None = None,
            finished_before: datetime | None = None, limit: int = 50,
            cursor: str | None = None) -> Page:
    """Jobs newest first by ``(created_at, id)``, keyset-paged (never OFFSET).

    Pages are stable while jobs are added: a later page continues strictly
    after the previous page's last row, so nothing repeats or is skipped
    among jobs that existed at the first page (jobs enqueued since appear
    only on a new first page).  ``finished_after`` is inclusive,
    ``finished_before`` exclusive; an empty status sequence means any.
    Bad arguments raise ``InvalidOption`` before any SQL runs.
    """
    if not isinstance(limit, int) or not 1 <= limit <= MAX_PAGE:
        raise InvalidOption(f"history limit must be between 1 and {MAX_PAGE}, got {limit!r}")
    params = HistoryParams(
        statuses=statuses(status, STATUSES, "history"), kind=kind,
        finished_after=aware("finished_after", finished_after),
        finished_before=aware("finished_before", finished_before),
        limit=limit, after=decode_cursor(cursor) if cursor is not None else None)
    with short_transaction(models, engine) as session:
        rows = archive_reads.fetch_history(models, session, params)  # the live table and the archive, one statement
    items = [JobInfo(**r._mapping) for r in rows[:limit]]
    more = len(rows) > limit
    return Page(items=items, next_cursor=encode_cursor(items[-1].created_at, items[-1].id) if more else None)
