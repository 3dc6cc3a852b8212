"""Fenced outcome writes: each changes the row only if the run still holds its claim."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from venturi_sa.models import Models
from venturi_sa.states import OUTCOME_STATUS, Outcome, Status
from venturi_sa.storage.params import ZERO, Fence, FinishManyParams, FinishParams, Runner


def finish(models: Models, session: Runner, params: FinishParams) -> bool:
    """Write one run's outcome and its journal row in ``session``; the caller commits.

    The same statement as :func:`finish_many`, for a batch of one.  Returns
    False, writing nothing, if the fence no longer matches (the lease was
    lost); the caller must then roll the session back.
    """
    return params.fence in finish_many(models, session, FinishManyParams(outcomes=[params]))


# One array parameter per column: the statement text never changes with the
# batch size, so SQLAlchemy compiles it once and PostgreSQL sees one shape.
_BATCH_COLUMNS: tuple[tuple[str, Any], ...] = (
    ("id", sa.Text),
    ("kind", sa.Text),
    ("claimed_by", sa.Text),
    ("run_count", sa.Integer),
    ("status", sa.Text),
    ("finished", sa.Boolean),
    ("visible_at", sa.DateTime(timezone=True)),
    ("delay", sa.Interval),
    ("failure_inc", sa.Integer),
    ("save_carry", sa.Boolean),
    ("carry", postgresql.JSONB),
    ("outcome", sa.Text),
    ("note", sa.Text),
    ("attachment", postgresql.JSONB),
    ("owe", sa.Boolean),
)
_STATEMENTS: dict[tuple[str, int], Any] = {}


_DUMPS = json.dumps
_JSON_NULL = "null"  # a saved carry of None: JSON null, as json.dumps(None)
# Per outcome, the columns it decides: (status, finished, outcome); looked up once per row.
_BY_OUTCOME: dict[Outcome, tuple[str, bool, str]] = {
    outcome: (status.value, status.terminal, outcome.value) for outcome, status in OUTCOME_STATUS.items()}


def _row(p: FinishParams) -> tuple[Any, ...]:
    """One outcome as the values of ``_BATCH_COLUMNS``, in order (one tuple, no per-column appends)."""
    fence = p.fence
    status, finished, outcome = _BY_OUTCOME[p.outcome]
    visible_at, attachment, carry = p.visible_at, p.attachment, p.carry
    return (fence.job_id, fence.kind, fence.claimed_by, fence.run_count, status, finished,
            None if visible_at is None else visible_at.isoformat(), p.delay or ZERO, 1 if p.failure else 0,
            p.save_carry, (_JSON_NULL if carry is None else _DUMPS(carry)) if p.save_carry else None, outcome, p.note,
            None if attachment is None else _DUMPS(attachment), p.owe_on_dead)


_NAMES = tuple(f"v_{name}" for name, _ in _BATCH_COLUMNS)


def _batch_columns(batch: Sequence[FinishParams]) -> dict[str, list[Any]]:
    """The batch's bind parameters: one array per column, transposed from one tuple per row."""
    return dict(zip(_NAMES, map(list, zip(*map(_row, batch), strict=True)), strict=True))


def _outcome_rows() -> Any:
    arrays = [
        sa.cast(sa.bindparam(f"v_{name}", type_=postgresql.ARRAY(sa.Text if name in _AS_TEXT else type_)),
                postgresql.ARRAY(type_))
        for name, type_ in _BATCH_COLUMNS
    ]
    return sa.func.unnest(*arrays).table_valued(*(name for name, _ in _BATCH_COLUMNS)).render_derived(
        name="outcome", with_types=False)


_AS_TEXT = {"carry", "attachment", "visible_at"}


def cancel_text(actor: Any, note: Any, why: Any) -> Any:
    """SQL for a cancel's journal note: ``cancelled by <actor> (<why>)[: <note>]`` (as ``cancels.cancel_note``)."""
    reason = sa.literal(why, sa.Text) if isinstance(why, str) else why
    return (sa.literal("cancelled by ", sa.Text) + actor + sa.literal(" (", sa.Text) + reason
            + sa.literal(")", sa.Text) + sa.func.coalesce(sa.literal(": ", sa.Text) + note, ""))


def owe_on_dead(models: Models, dead: Any, now: Any) -> Any:
    """``INSERT INTO <prefix>_on_dead`` one owed ``on_dead`` call per row of ``dead`` (a data-modifying CTE).

    ``dead`` has columns ``id``, ``kind``, ``run_count``, ``note`` and ``actor``.
    """
    return sa.insert(models.on_dead_table).from_select(
        ["job_id", "kind", "run_no", "note", "actor", "created_at", "not_before"],
        sa.select(dead.c.id, dead.c.kind, dead.c.run_count, dead.c.note, dead.c.actor, now, now))


def clear_cancels(models: Models, ended: Any) -> Any:
    """``DELETE`` the cancel requests of the jobs in ``ended`` (column ``id``): their job is terminal."""
    cancels = models.cancels_table
    return sa.delete(cancels).where(cancels.c.job_id.in_(sa.select(ended.c.id)))


def _finish_many_statement(models: Models) -> Any:
    """``WITH done AS (fenced UPDATE ... RETURNING id) INSERT INTO journal ... RETURNING job_id``.

    One round trip writes every row and, for the rows whose fence held, their
    journal entries.  A run that would send its job back to ``pending``
    (retried, paused, released) while a cancel request for the job is still
    undelivered ends it ``dead`` instead, journaled as cancelled by the
    request's actor, with an ``on_dead`` call owed (as is one for an
    outcome built with ``owe_on_dead``); the cancel requests of jobs that
    end terminal go with this statement.
    """
    key = (models.prefix, id(models.Job))
    if key in _STATEMENTS:
        return _STATEMENTS[key]
    job, journal, cancels = models.jobs_table.c, models.journal_table, models.cancels_table.c
    rows = _outcome_rows()
    # Each outcome with its job's cancel request, if one is stored (a primary-key probe of an
    # almost always empty table; the planner flattens the outer join into the UPDATE's FROM).
    outcome = (sa.select(rows, cancels.actor.label("cancel_actor"), cancels.note.label("cancel_note"))
               .select_from(rows.outerjoin(models.cancels_table, cancels.job_id == rows.c.id))
               .subquery("requested"))
    now = sa.func.clock_timestamp()
    to_pending = outcome.c.status == Status.PENDING.value
    cancelled = sa.and_(to_pending, outcome.c.cancel_actor.is_not(None))
    done = (
        sa.update(models.jobs_table)
        .where(job.id == outcome.c.id, job.status == Status.CLAIMED.value,
               job.claimed_by == outcome.c.claimed_by, job.run_count == outcome.c.run_count)
        .values(
            status=sa.case((cancelled, Status.DEAD.value), else_=outcome.c.status),
            claimed_by=None,
            claim_expires_at=None,
            finished_at=sa.case((sa.or_(outcome.c.finished, cancelled), now), else_=job.finished_at),
            visible_at=sa.case((sa.and_(to_pending, sa.not_(cancelled)),
                                sa.func.coalesce(outcome.c.visible_at, now + outcome.c.delay)),
                               else_=job.visible_at),
            failure_count=job.failure_count + outcome.c.failure_inc,
            carry=sa.case((outcome.c.save_carry, outcome.c.carry), else_=job.carry),
        )
        .returning(job.id, job.kind, job.run_count, job.status,
                   sa.case((cancelled, Outcome.DEAD.value), else_=outcome.c.outcome).label("outcome"),
                   sa.case((cancelled, cancel_text(outcome.c.cancel_actor, outcome.c.cancel_note,
                                                   "before the cancel reached its run, the run ended")),
                           else_=outcome.c.note).label("note"),
                   outcome.c.attachment,
                   sa.or_(cancelled, outcome.c.owe).label("owed"),
                   sa.func.coalesce(outcome.c.cancel_actor, outcome.c.claimed_by).label("actor"))
        .cte("done")
    )
    owed = owe_on_dead(models, sa.select(done).where(done.c.owed).subquery("owing"), now).cte("owed")
    ended = sa.select(done.c.id).where(done.c.status != Status.PENDING.value).cte("ended")  # terminal now
    cleared = clear_cancels(models, ended).cte("cleared")
    stmt = (
        sa.insert(journal)
        .from_select(["job_id", "kind", "run_no", "recorded_at", "outcome", "note", "attachment"],
                     sa.select(done.c.id, done.c.kind, done.c.run_count, now, done.c.outcome, done.c.note,
                               done.c.attachment))
        .returning(journal.c.job_id, journal.c.run_no)
        .add_cte(done, owed, ended, cleared)
    )
    _STATEMENTS[key] = stmt
    return stmt


def finish_many(models: Models, session: Runner, params: FinishManyParams) -> set[Fence]:
    """Write many runs' outcomes and their journal rows in one statement.

    Returns the fences that still matched; only those rows change and get a
    journal entry.  Runs whose lease was lost are left untouched.  The
    caller commits.  Every value was validated when its
    :class:`FinishParams` was built, so only a database fault can fail it.
    """
    batch = params.outcomes
    if not batch:
        return set()
    written = {(r[0], r[1]) for r in session.execute(_finish_many_statement(models), _batch_columns(batch))}
    return {p.fence for p in batch if (p.fence.job_id, p.fence.run_count) in written}
