"""Durable steps, sleeps and waits: rows of ``<prefix>_steps``, written fenced on the run's claim.

Every write here runs in the caller's transaction (the worker's short
step transaction) and first locks the job row ``FOR KEY SHARE`` under the
run's fence (id, ``claimed``, claimed_by, run_count): a run whose claim is
gone (a zombie after a recovery) finds no row and writes nothing, and a
recovery (``FOR UPDATE SKIP LOCKED``) skips the job and an outcome write
(which locks ``FOR UPDATE`` first) waits until the step's transaction has
ended, so a step is recorded only while its run holds the claim.  The lease
renewal (``FOR NO KEY UPDATE SKIP LOCKED``) is not held back by it.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from venturi_sa.models import Models
from venturi_sa.states import Status
from venturi_sa.storage import timestamps
from venturi_sa.storage.durable_params import Reached, StepInfo
from venturi_sa.storage.params import Fence, Runner
from venturi_sa.storage.timestamps import moment

NOW = sa.func.clock_timestamp


def _records(rows: Any) -> list[StepInfo]:
    return [StepInfo(r.name, r.entry, r.result, r.run_no, r.started_at, r.finished_at, r.wake_at, r.resolution)
            for r in rows]


def _columns(models: Models) -> list[Any]:
    c = models.steps_table.c
    return [c.name, c.entry, c.result, c.run_no, c.started_at, c.finished_at, c.wake_at, c.resolution]


def load(models: Models, runner: Runner, job_id: str) -> tuple[dict[str, StepInfo], datetime]:
    """Every recorded entry of ``job_id`` by name, and the database clock now (one round trip)."""
    c = models.steps_table.c
    clock = sa.select(NOW().label("now")).subquery("clock")
    rows = runner.execute(sa.select(*_columns(models), clock.c.now).select_from(
        clock.outerjoin(models.steps_table, c.job_id == job_id))).all()
    records = {r.name: r for r in _records([r for r in rows if r.name is not None])}
    return records, rows[0].now


def read(models: Models, runner: Runner, job_id: str) -> list[StepInfo]:
    """The recorded entries of ``job_id``, in the order they were first reached."""
    c = models.steps_table.c
    return _records(runner.execute(sa.select(*_columns(models)).where(c.job_id == job_id)
                                   .order_by(c.started_at, c.name)).all())


def read_page(models: Models, runner: Runner, job_id: str, after: tuple[datetime, str] | None,
              limit: int) -> tuple[list[StepInfo], int]:
    """Up to ``limit`` entries of ``job_id`` after ``(started_at, name)`` ``after``, in the order of
    :func:`read`, and how many entries the job has (one statement: the count is a scalar subquery)."""
    c = models.steps_table.c
    total = sa.select(sa.func.count()).where(c.job_id == job_id).scalar_subquery()
    stmt = sa.select(sa.literal(1).label("one"), total.label("total")).subquery("counted")
    page = sa.select(*_columns(models)).where(c.job_id == job_id)
    if after is not None:
        page = page.where(sa.tuple_(c.started_at, c.name) > sa.tuple_(sa.literal(after[0]), sa.literal(after[1])))
    shown = page.order_by(c.started_at, c.name).limit(limit).subquery("shown")
    rows = runner.execute(sa.select(stmt.c.total, *shown.c).select_from(
        stmt.outerjoin(shown, sa.true())).order_by(shown.c.started_at, shown.c.name)).all()
    return _records([r for r in rows if r.name is not None]), int(rows[0].total)


def hold_fence(models: Models, runner: Runner, fence: Fence) -> bool:
    """Lock the job row ``FOR KEY SHARE`` if ``fence``'s run still holds the claim; False (nothing locked) if not."""
    job = models.jobs_table.c
    row = runner.execute(sa.select(job.id).where(
        job.id == fence.job_id, job.status == Status.CLAIMED.value, job.claimed_by == fence.claimed_by,
        job.run_count == fence.run_count).with_for_update(read=True, key_share=True)).first()
    return row is not None


def _json(value: Any) -> Any:
    return sa.cast(sa.literal(json.dumps(value), sa.Text), postgresql.JSONB)


def _insert(models: Models, values: dict[str, Any]) -> Any:
    return (postgresql.insert(models.steps_table).values(**values)
            .on_conflict_do_nothing(index_elements=["job_id", "name"])
            .returning(*_columns(models)))


def record_step(models: Models, runner: Runner, fence: Fence, name: str, result: Any,
                elapsed: float) -> StepInfo | None:
    """Record a step's ``result`` (JSON; None is JSON null), started ``elapsed`` seconds ago.

    Returns the record (an earlier one of that name if it exists), or None
    if the fence no longer holds (nothing written).  The caller commits.
    """
    if not hold_fence(models, runner, fence):
        return None
    started = NOW() - sa.literal(timedelta(seconds=max(elapsed, 0.0)), sa.Interval)
    row = runner.execute(_insert(models, {
        "job_id": fence.job_id, "name": name, "entry": "step", "result": _json(result),
        "run_no": fence.run_count, "started_at": started, "finished_at": NOW()})).first()
    if row is not None:
        return _records([row])[0]
    return fetch(models, runner, fence.job_id, name)


def fetch(models: Models, runner: Runner, job_id: str, name: str) -> StepInfo | None:
    """The recorded entry ``name`` of ``job_id``, or None."""
    c = models.steps_table.c
    rows = runner.execute(sa.select(*_columns(models)).where(c.job_id == job_id, c.name == name)).all()
    return _records(rows)[0] if rows else None


def reach_sleep(models: Models, runner: Runner, fence: Fence, name: str, delay: timedelta | None,
                until: datetime | None) -> Reached | None:
    """Record sleep ``name`` (wake at now + ``delay``, or ``until``) unless recorded; None if fenced out."""
    if not hold_fence(models, runner, fence):
        return None
    wake = moment(until) if until is not None else NOW() + sa.literal(delay or timedelta(0), sa.Interval)
    runner.execute(_insert(models, {"job_id": fence.job_id, "name": name, "entry": "sleep", "result": None,
                                    "run_no": fence.run_count, "started_at": NOW(), "wake_at": wake}))
    return _reached(models, runner, fence.job_id, name)


def _reached(models: Models, runner: Runner, job_id: str, name: str) -> Reached:
    c = models.steps_table.c
    row = runner.execute(sa.select(*_columns(models), NOW().label("now"))
                         .where(c.job_id == job_id, c.name == name)).one()
    return Reached(_records([row])[0], row.now)


def reach_wait(models: Models, runner: Runner, fence: Fence, name: str,
               timeout: timedelta | None) -> Reached | None:
    """Record wait ``name`` (deadline now + ``timeout``) unless recorded, and resolve it if it can be.

    An open wait with a signal of its name stored before its deadline is
    resolved ``signal`` (the payload becomes its result); one at or past its
    deadline without one ``timeout``.
    None if fenced out (nothing written).  The caller commits.
    """
    if not hold_fence(models, runner, fence):
        return None
    deadline = None if timeout is None else NOW() + sa.literal(timeout, sa.Interval)
    runner.execute(_insert(models, {"job_id": fence.job_id, "name": name, "entry": "wait", "result": None,
                                    "run_no": fence.run_count, "started_at": NOW(), "wake_at": deadline}))
    c, s = models.steps_table.c, models.signals_table.c
    # a signal counts only if it was sent before the deadline (queue.signal refuses a later one)
    signal = sa.select(s.payload).where(s.job_id == c.job_id, s.name == c.name,
                                        sa.or_(c.wake_at.is_(None), s.sent_at < c.wake_at))
    resolved = (sa.update(models.steps_table)
                .where(c.job_id == fence.job_id, c.name == name, c.entry == "wait", c.resolution.is_(None))
                .values(resolution=sa.case((sa.exists(signal), "signal"),
                                           (c.wake_at <= NOW(), "timeout"), else_=None),
                        result=sa.case((sa.exists(signal), signal.scalar_subquery()), else_=c.result),
                        finished_at=sa.case((sa.or_(sa.exists(signal), c.wake_at <= NOW()), NOW()),
                                            else_=None)))
    runner.execute(resolved)
    return _reached(models, runner, fence.job_id, name)


def suspend_wait(models: Models, runner: Runner, fence: Fence, name: str, deadline: datetime | None) -> None:
    """In a suspended wait's outcome transaction, after its fenced write: wake it now if a signal is stored.

    The outcome write has locked the job row ``FOR UPDATE`` (after every
    ``queue.signal`` holding it ``FOR KEY SHARE`` had ended), so one that
    commits from here on finds the job ``pending`` and wakes it; one that
    committed before is read here (READ COMMITTED).  Otherwise the job
    stays invisible until ``deadline`` (``'infinity'`` without one).
    """
    job, s = models.jobs_table.c, models.signals_table.c
    stored = sa.exists().where(s.job_id == fence.job_id, s.name == name)
    until = moment(deadline) if deadline is not None else timestamps.INFINITY
    runner.execute(sa.update(models.jobs_table)
                   .where(job.id == fence.job_id, job.status == Status.PENDING.value,
                          job.run_count == fence.run_count)
                   .values(visible_at=sa.case((stored, NOW()), else_=until)))


def reset(models: Models, runner: Runner, job_id: str) -> int:
    """Delete the recorded entries of ``job_id`` (``requeue(..., reset_steps=True)``); how many went."""
    c = models.steps_table.c
    return len(runner.execute(sa.delete(models.steps_table).where(c.job_id == job_id).returning(c.name)).all())


def has_entries(models: Models, job: Any) -> Any:
    """SQL: the job (a jobs table or alias) has recorded steps, sleeps or waits (never a merge target)."""
    c = models.steps_table.c
    return sa.exists().where(c.job_id == job.id)


def job_exists(models: Models, runner: Runner, job_id: str) -> bool:
    """Whether ``job_id`` is a row of the jobs table."""
    job = models.jobs_table.c
    return runner.execute(sa.select(job.id).where(job.id == job_id)).first() is not None


def suspension(models: Models, runner: Runner, job_id: str) -> StepInfo | None:
    """What holds a pending job back, if a durable wait or sleep does: its open wait, else its latest future sleep.

    Read by ``explain`` (``waiting_for_signal``, ``sleeping``) in the caller's transaction.
    """
    c = models.steps_table.c
    rows = runner.execute(sa.select(*_columns(models)).where(
        c.job_id == job_id, sa.or_(sa.and_(c.entry == "wait", c.resolution.is_(None)),
                                   sa.and_(c.entry == "sleep", c.wake_at > sa.func.now())))
        .order_by(sa.case((c.entry == "wait", 0), else_=1), c.started_at.desc()).limit(1)).all()
    return _records(rows)[0] if rows else None


def has_any(models: Models, runner: Runner, job_id: str) -> bool:
    """Whether ``job_id`` has recorded steps, sleeps or waits."""
    c = models.steps_table.c
    return runner.execute(sa.select(sa.exists().where(c.job_id == job_id))).scalar_one() is True


def next_wake(models: Models, runner: Runner, kinds: list[str]) -> datetime | None:
    """The soonest wake time of a pending job of ``kinds`` in a durable sleep, or None."""
    job, c = models.jobs_table.c, models.steps_table.c
    asleep = sa.exists().where(c.job_id == job.id, c.entry == "sleep", c.wake_at == job.visible_at)
    value: datetime | None = runner.execute(
        sa.select(sa.func.min(job.visible_at)).where(
            job.status == Status.PENDING.value, job.kind.in_(kinds), job.visible_at > sa.func.now(),
            asleep)).scalar_one()
    return value
