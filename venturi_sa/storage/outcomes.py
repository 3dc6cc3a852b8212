"""Fenced outcome writes: each changes the row only if the run still holds its claim.

An outcome transaction first locks its jobs' rows ``FOR UPDATE`` (in id
order), in a statement of its own, and only then writes: that lock waits
for every caller's transaction holding ``FOR KEY SHARE`` on one of them (an
``after=`` enqueue naming it as a parent, a ``queue.signal``, a
``queue.cancel`` of the running job), so the outcome statement and the
statements after it (``dependents.settle``, a suspended wait's look for
stored signals) read what those callers committed, and a caller that comes
later waits for the outcome's commit and sees it.  Callers' locks never
conflict with the lease renewal (``FOR NO KEY UPDATE SKIP LOCKED``), so a
long caller transaction holds back the outcome of the rows it locked, never
their leases.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from venturi_sa.models import Models
from venturi_sa.states import OUTCOME_STATUS, Outcome, Status
from venturi_sa.storage import dependents, driver_sql
from venturi_sa.storage.params import Fence, FinishManyParams, FinishParams, Runner


def finish(models: Models, session: Runner, params: FinishParams) -> Outcome | None:
    """Write one run's outcome and its journal row in ``session``; the caller commits.

    The same statement as :func:`finish_many`, for a batch of one.  Returns
    the outcome recorded (see :func:`undelivered_cancel`), or None, writing
    nothing, if the fence no longer matches (the lease was lost); the caller
    must then roll the session back.
    """
    return finish_many(models, session, FinishManyParams(outcomes=[params])).get(params.fence)


# The batch is one parameter: a JSON array with one array per outcome, its values in the order of
# _BATCH_COLUMNS, read back positionally.  The statement text never changes with the batch size
# (SQLAlchemy compiles it once, PostgreSQL sees one shape), and the client adapts one string
# instead of one value per column and row (psycopg2 quoted each array element, about 12 µs per row).
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

_LOCK = """
SELECT j.id FROM {jobs} AS j
WHERE j.id = ANY(:ids) AND j.status = 'claimed' AND j.claimed_by = ANY(:workers)
ORDER BY j.id
FOR UPDATE OF j
"""
_LOCKS: dict[str, sa.TextClause] = {}


def _lock_statement(models: Models) -> sa.TextClause:
    """Lock the batch's rows that are still claimed by its workers ``FOR UPDATE``, in id order (waits)."""
    stmt = _LOCKS.get(models.prefix)
    if stmt is None:
        ids = postgresql.ARRAY(sa.Text)
        stmt = _LOCKS[models.prefix] = sa.text(_LOCK.format(jobs=models.names.jobs)).bindparams(
            sa.bindparam("ids", type_=ids), sa.bindparam("workers", type_=ids))
    return stmt


_DUMPS = json.JSONEncoder(separators=(",", ":")).encode  # json.dumps, compact
# Per outcome, the columns it decides: (status, finished, outcome); looked up once per row.
_BY_OUTCOME: dict[Outcome, tuple[str, bool, str]] = {
    outcome: (status.value, status.terminal, outcome.value) for outcome, status in OUTCOME_STATUS.items()}


def _interval(delay: timedelta | None) -> str:
    """A delay as PostgreSQL interval input, exactly (days, seconds and microseconds apart)."""
    if not delay:
        return "0"
    return f"{delay.days} days {delay.seconds} seconds {delay.microseconds} microseconds"


def _row(p: FinishParams) -> tuple[Any, ...]:
    """One outcome as the values of ``_BATCH_COLUMNS``, in order (JSON values: carry and attachment as they are)."""
    fence = p.fence
    status, finished, outcome = _BY_OUTCOME[p.outcome]
    visible_at = p.visible_at
    return (fence.job_id, fence.kind, fence.claimed_by, fence.run_count, status, finished,
            None if visible_at is None else visible_at.isoformat(), _interval(p.delay), 1 if p.failure else 0,
            p.save_carry, p.carry if p.save_carry else None, outcome, p.note, p.attachment, p.owe_on_dead)


def _batch_document(batch: Sequence[FinishParams]) -> str:
    """The batch's one bind parameter: ``[[id, kind, ...], ...]`` as JSON text."""
    return _DUMPS(list(map(_row, batch)))


def _outcome_rows() -> Any:
    """The batch parameter as rows of the columns of ``_BATCH_COLUMNS`` (``outcome.id``, ...).

    A saved carry of None is JSON ``null`` (``->`` keeps it; the column is
    NOT NULL); an attachment of None is SQL NULL.
    """
    document = sa.cast(sa.bindparam("outcomes", type_=sa.Text), postgresql.JSONB)
    element = sa.func.jsonb_array_elements(document).table_valued(
        sa.column("value", postgresql.JSONB)).render_derived(name="batch").c.value
    columns = []
    for i, (name, type_) in enumerate(_BATCH_COLUMNS):
        if name == "carry":
            value = element[i]
        elif name == "attachment":
            value = sa.func.nullif(element[i], sa.cast(sa.literal("null"), postgresql.JSONB))
        else:
            value = sa.cast(element[i].astext, type_)
        columns.append(value.label(name))
    return sa.select(*columns).subquery("outcome")


def cancel_text(actor: Any, note: Any, why: Any) -> Any:
    """SQL for a cancel's journal note: ``cancelled by <actor> (<why>)[: <note>]`` (as ``cancels.cancel_note``)."""
    reason = sa.literal(why, sa.Text) if isinstance(why, str) else why
    return (sa.literal("cancelled by ", sa.Text) + actor + sa.literal(" (", sa.Text) + reason
            + sa.literal(")", sa.Text) + sa.func.coalesce(sa.literal(": ", sa.Text) + note, ""))


@dataclass(frozen=True)
class UndeliveredCancel:
    """The one rule for a cancel request its run never read, as SQL over one ending row.

    A run's ending that would send its job back to ``pending`` (a run's
    ``retried``, ``paused`` or ``released``; any stale recovery) while a
    cancel request for the job is stored ends the job ``dead`` instead:
    journaled ``dead`` as cancelled by the request's actor, with an
    ``on_dead`` call owed, and the request cleared with the job terminal.
    Both statements that end a claim without the run having read the
    request use it: :func:`finish_many` and
    :func:`venturi_sa.storage.recovery.recover` (the memory backend mirrors
    it in ``storage/memory.py``).  A cancel the run did read (delivered by
    the lease renewal) is decided by the worker before the write
    (``worker/pipeline_stages.control``): the run then asks for ``dead``
    itself and this rule has nothing to turn.
    """

    applies: Any  # SQL boolean: the ending is turned into a cancelled ``dead``
    actor: Any  # the request's actor (NULL without a request)
    request_note: Any  # the request's note

    def status(self, otherwise: Any) -> Any:
        return sa.case((self.applies, Status.DEAD.value), else_=otherwise)

    def outcome(self, otherwise: Any) -> Any:
        return sa.case((self.applies, Outcome.DEAD.value), else_=otherwise)

    def note(self, why: Any, otherwise: Any) -> Any:
        return sa.case((self.applies, cancel_text(self.actor, self.request_note, why)), else_=otherwise)


def undelivered_cancel(sends_back: Any, actor: Any, request_note: Any) -> UndeliveredCancel:
    """The rule of :class:`UndeliveredCancel` for an ending that ``sends_back`` to ``pending`` (SQL boolean),
    with the stored request's ``actor`` and ``request_note`` columns (outer-joined: NULL without one)."""
    return UndeliveredCancel(applies=sa.and_(sends_back, actor.is_not(None)), actor=actor,
                             request_note=request_note)


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
    """``WITH done AS (fenced UPDATE ... RETURNING id) INSERT INTO journal ... RETURNING job_id, run_no, outcome``.

    One round trip writes every row and, for the rows whose fence held, their
    journal entries, and returns the outcome each recorded.  A stored,
    undelivered cancel request turns an outcome that sends the job back to
    ``pending`` into a cancelled ``dead`` (:func:`undelivered_cancel`); an
    outcome built with ``owe_on_dead`` owes its ``on_dead`` call too; the
    cancel requests of jobs that end terminal go with this statement.
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
    cancel = undelivered_cancel(to_pending, outcome.c.cancel_actor, outcome.c.cancel_note)
    done = (
        sa.update(models.jobs_table)
        .where(job.id == outcome.c.id, job.status == Status.CLAIMED.value,
               job.claimed_by == outcome.c.claimed_by, job.run_count == outcome.c.run_count)
        .values(
            status=cancel.status(outcome.c.status),
            claimed_by=None,
            claim_expires_at=None,
            finished_at=sa.case((sa.or_(outcome.c.finished, cancel.applies), now), else_=job.finished_at),
            visible_at=sa.case((sa.and_(to_pending, sa.not_(cancel.applies)),
                                sa.func.coalesce(outcome.c.visible_at, now + outcome.c.delay)),
                               else_=job.visible_at),
            failure_count=job.failure_count + outcome.c.failure_inc,
            carry=sa.case((outcome.c.save_carry, outcome.c.carry), else_=job.carry),
        )
        .returning(job.id, job.kind, job.run_count, job.status,
                   cancel.outcome(outcome.c.outcome).label("outcome"),
                   cancel.note("before the cancel reached its run, the run ended", outcome.c.note).label("note"),
                   outcome.c.attachment,
                   sa.or_(cancel.applies, outcome.c.owe).label("owed"),
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
        .returning(journal.c.job_id, journal.c.run_no, journal.c.outcome, _has_dependents(models, journal))
        .add_cte(done, owed, ended, cleared)
    )
    _STATEMENTS[key] = stmt
    return stmt


def _has_dependents(models: Models, journal: Any) -> Any:
    """Whether a dependency row names the ``journal`` row's job as a parent not yet counted done (an index probe).

    Read in the outcome statement, after the batch's row locks: it sees every
    dependency row :func:`dependents.settle` would see then (an ``after=``
    enqueue naming one of these jobs waits for the lock), so a batch without
    one skips the settle's statement.
    """
    # Text: SQLAlchemy does not correlate a subquery in an INSERT's RETURNING with the inserted table.
    return sa.literal_column(f"EXISTS (SELECT FROM {models.workflow.parents_table.name} AS waiting_on "
                             f"WHERE waiting_on.parent_id = {journal.name}.job_id AND NOT waiting_on.done)",
                             sa.Boolean).label("has_dependents")


def finish_many(models: Models, session: Runner, params: FinishManyParams) -> dict[Fence, Outcome]:
    """Write many runs' outcomes and their journal rows in one statement; the outcome each recorded, by fence.

    The rows are locked ``FOR UPDATE`` first (see the module's docstring):
    a caller's transaction holding one of them ``FOR KEY SHARE`` holds the
    batch back until it ends.  Returns each fence that still matched with
    the outcome its row and journal entry now hold, read from the
    statement's own ``RETURNING``: the run's own, or ``dead`` where
    :func:`undelivered_cancel` turned it.  A run whose lease was lost is
    absent and its row untouched.  Nothing is committed here: on the
    caller's commit all of it lands, on a rollback (or a crash before the
    commit) none of it does and the claims stand until their leases expire.
    Every value was validated when its :class:`FinishParams` was built, so
    only a database fault can fail it.
    """
    batch = params.outcomes
    if not batch:
        return {}
    _run(session, _lock_statement(models), {  # a statement of its own: the write below reads after the wait
        "ids": sorted({p.fence.job_id for p in batch}), "workers": sorted({p.fence.claimed_by for p in batch})}).all()
    rows = _run(session, _finish_many_statement(models), {"outcomes": _batch_document(batch)}).all()
    written = {(r[0], r[1]): r[2] for r in rows}
    # parents that ended release/kill theirs; a batch whose jobs no dependent waits for sends nothing more
    dependents.settle(models, session, [r[0] for r in rows if r[3]])
    recorded: dict[Fence, Outcome] = {}
    for p in batch:
        outcome = written.get((p.fence.job_id, p.fence.run_count))
        if outcome is not None:
            recorded[p.fence] = p.outcome if outcome == p.outcome.value else Outcome(outcome)
    return recorded


def _run(session: Runner, statement: Any, binds: dict[str, Any]) -> Any:
    """Execute ``statement`` as driver SQL where the connection allows it, else through SQLAlchemy."""
    text = driver_sql.driver_text(session, statement)
    if text is None:
        return session.execute(statement, binds)
    assert isinstance(session, sa.Connection)
    return driver_sql.execute(session, text[0], text[1], binds)
