"""Every row of SPEC §5's outcome table, through a real worker on a real PostgreSQL.

The backoff and delay arithmetic is checked in the test's own rolled-back
transaction instead (``venturi_sa.testing``: drain, with the database clock
frozen), where the times are exact.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
import sqlalchemy as sa
from marshmallow import Schema, fields
from sqlalchemy.orm import Session
from support.queues import drain, outcomes, side_rows, side_table, side_write
from support.workers import enqueue, job_row, journal

from venturi_sa import Complete, Die, JobContext, Pause, Queue, Retry, Task, testing
from venturi_sa.testing import Clock


class Script(Schema):
    action = fields.String(required=True)
    note = fields.String(load_default=None)


def scripted(prefix: str, side: str | None = None, **policy: Any) -> type[Task]:
    """A task whose payload says what the handler returns."""

    def run(self: Task, ctx: JobContext) -> Any:
        action, note = self.payload["action"], self.payload["note"]
        if side is not None:
            side_write(ctx.session, side, ctx.job_id, ctx.run_count, action)
        if action == "complete":
            return Complete(note)
        if action == "none":
            return None
        if action == "pause_delay":
            return Pause(delay=timedelta(hours=1), note=note)
        if action == "retry":
            return Retry(note)
        if action == "raise":
            raise ValueError("the disk is full")
        if action == "die":
            return Die(note or "cannot ever work")
        raise AssertionError(action)

    attrs: dict[str, Any] = {"KIND": "scripted", "Payload": Script, "run": run,
                             "backoff": classmethod(lambda cls, n: timedelta(minutes=10)), **policy}
    return type("Scripted", (Task,), attrs)


def test_complete_sets_finished_and_journals_note(engine: sa.Engine, models: Any, prefix: str) -> None:
    T = scripted(prefix)
    queue = Queue(models, [T])
    [job_id] = enqueue(engine, queue, T(action="complete", note="sent 3 mails"))
    assert drain(queue, engine) == 1
    row = job_row(engine, models, job_id)
    assert (row.status, row.run_count, row.failure_count) == ("completed", 1, 0)
    assert row.finished_at is not None and row.claimed_by is None and row.claim_expires_at is None
    [entry] = journal(engine, models, job_id)
    assert (entry.outcome, entry.run_no, entry.note, entry.kind) == ("completed", 1, "sent 3 mails", "scripted")
    assert entry.recorded_at >= row.created_at


def test_returning_none_means_complete(engine: sa.Engine, models: Any, prefix: str) -> None:
    T = scripted(prefix)
    queue = Queue(models, [T])
    [job_id] = enqueue(engine, queue, T(action="none"))
    drain(queue, engine)
    assert job_row(engine, models, job_id).status == "completed"
    assert outcomes(engine, models, job_id) == ["completed"]


def test_pause_with_delay_is_not_a_failure(engine: sa.Engine, models: Any, prefix: str) -> None:
    T = scripted(prefix)
    queue = Queue(models, [T])
    [job_id] = enqueue(engine, queue, T(action="pause_delay", note="waiting for the bank"))
    drain(queue, engine)
    row = job_row(engine, models, job_id)
    [entry] = journal(engine, models, job_id)
    assert (row.status, row.run_count, row.failure_count, row.finished_at) == ("pending", 1, 0, None)
    assert (entry.outcome, entry.note, entry.run_no) == ("paused", "waiting for the bank", 1)
    assert row.visible_at - entry.recorded_at == pytest.approx(timedelta(hours=1), abs=timedelta(seconds=1))


def test_pause_until_sets_visible_at(engine: sa.Engine, models: Any) -> None:
    until = datetime(2099, 1, 2, 3, 4, 5, tzinfo=timezone.utc)

    class Later(Task):
        KIND = "later"

        def run(self, ctx: JobContext) -> Pause:
            return Pause(until=until, note="see you in 2099")

    queue = Queue(models, [Later])
    [job_id] = enqueue(engine, queue, Later())
    drain(queue, engine)
    row = job_row(engine, models, job_id)
    assert (row.status, row.visible_at, row.failure_count) == ("pending", until, 0)
    assert outcomes(engine, models, job_id) == ["paused"]


@pytest.mark.parametrize(("action", "note"), [("retry", "try later"), ("raise", "the disk is full")])
def test_retry_and_exception_count_a_failure(engine: sa.Engine, models: Any, prefix: str,
                                             action: str, note: str) -> None:
    T = scripted(prefix, max_failures=3)
    queue = Queue(models, [T])
    [job_id] = enqueue(engine, queue, T(action=action, note="try later"))
    drain(queue, engine)
    row = job_row(engine, models, job_id)
    [entry] = journal(engine, models, job_id)
    assert (row.status, row.run_count, row.failure_count, row.finished_at) == ("pending", 1, 1, None)
    assert entry.outcome == "retried" and note in entry.note
    # the task's backoff (10 minutes) decides visibility, on the database clock
    assert row.visible_at - entry.recorded_at == pytest.approx(timedelta(minutes=10), abs=timedelta(seconds=1))


def test_backoff_is_computed_on_the_db_clock_per_failure(venturi_queue_session: Session, venturi_clock: Clock,
                                                          models: Any) -> None:
    """In the test's transaction, with the database clock frozen: exact times, no waiting, no row surgery."""

    class Flaky(Task):
        KIND = "flaky"
        max_failures = 10

        @classmethod
        def backoff(cls, failure_count: int) -> timedelta:
            return timedelta(seconds=30 * failure_count)

        def run(self, ctx: JobContext) -> None:
            raise RuntimeError(f"failure {ctx.failure_count + 1}")

    queue, session = Queue(models, [Flaky]), venturi_queue_session
    job = queue.enqueue(session, Flaky())
    now = venturi_clock.freeze()
    for expected in (1, 2, 3):
        assert testing.drain(session, queue, fail_fast=False).retried == 1
        last = session.scalars(sa.select(models.JournalEntry).where(models.JournalEntry.job_id == job.id)
                               .order_by(models.JournalEntry.id.desc()).limit(1)).one()
        assert (job.failure_count, last.outcome, last.run_no, last.recorded_at) == (expected, "retried", expected, now)
        assert job.visible_at == now + timedelta(seconds=30 * expected)
        assert testing.drain(session, queue).total == 0  # not due a moment early
        now = venturi_clock.advance(timedelta(seconds=30 * expected))


def test_retry_delay_overrides_backoff(venturi_queue_session: Session, venturi_clock: Clock, models: Any) -> None:
    class Soon(Task):
        KIND = "soon"

        def run(self, ctx: JobContext) -> Retry:
            return Retry("not yet", delay=timedelta(seconds=7))

    queue = Queue(models, [Soon])
    now = venturi_clock.freeze()
    queue.enqueue(venturi_queue_session, Soon())
    assert testing.drain(venturi_queue_session, queue).runs[0].note == "not yet"
    testing.assert_enqueued(venturi_queue_session, queue, Soon, scheduled_within=(now + timedelta(seconds=7),
                                                                                  timedelta(0)))


def test_backstop_makes_the_job_dead(engine: sa.Engine, models: Any) -> None:
    runs: list[int] = []

    class Doomed(Task):
        KIND = "doomed"
        max_failures = 3

        @classmethod
        def backoff(cls, failure_count: int) -> timedelta:
            return timedelta(0)

        def run(self, ctx: JobContext) -> None:
            runs.append(ctx.run_count)
            raise ConnectionError("upstream down")

    queue = Queue(models, [Doomed])
    [job_id] = enqueue(engine, queue, Doomed())
    assert drain(queue, engine) == 3  # retries with no backoff are eligible at once
    row = job_row(engine, models, job_id)
    assert (row.status, row.failure_count, row.run_count) == ("dead", 3, 3)
    assert row.finished_at is not None and row.claimed_by is None
    entries = journal(engine, models, job_id)
    assert [(e.outcome, e.run_no) for e in entries] == [("retried", 1), ("retried", 2), ("dead", 3)]
    assert "upstream down" in entries[-1].note and "max_failures" in entries[-1].note
    assert runs == [1, 2, 3]


def test_die_is_dead_at_once_without_counting_a_failure(engine: sa.Engine, models: Any, prefix: str) -> None:
    T = scripted(prefix, max_failures=5)
    queue = Queue(models, [T])
    [job_id] = enqueue(engine, queue, T(action="die", note="card declined for good"))
    drain(queue, engine)
    row = job_row(engine, models, job_id)
    assert (row.status, row.failure_count, row.run_count) == ("dead", 0, 1)
    assert row.finished_at is not None
    [entry] = journal(engine, models, job_id)
    assert (entry.outcome, entry.note) == ("dead", "card declined for good")


def test_ctx_session_commits_with_the_outcome_and_rolls_back_on_failure(
        engine: sa.Engine, models: Any, prefix: str) -> None:
    side = side_table(engine, prefix)
    T = scripted(prefix, side=side, max_failures=3)
    queue = Queue(models, [T])
    ok, failed, died = enqueue(engine, queue, T(action="complete"), T(action="raise"), T(action="die"))
    drain(queue, engine)
    rows = side_rows(engine, side)
    # the handler's writes commit with complete and die; an exception rolls them back
    assert sorted((r.job_id, r.note) for r in rows) == sorted([(ok, "complete"), (died, "die")])
    assert job_row(engine, models, failed).status == "pending"


def test_pause_resume_round_trips_carry_and_attachments(engine: sa.Engine, models: Any) -> None:
    seen: list[Any] = []

    class Progress(Schema):
        page = fields.Integer(required=True)
        since = fields.DateTime(required=True)
        cursors = fields.List(fields.String(), required=True)

    start = datetime(2024, 5, 6, 7, 8, 9, tzinfo=timezone.utc)

    class Import(Task):
        KIND = "import"
        Carry = Progress

        def run(self, ctx: JobContext) -> Any:
            seen.append(ctx.carry)
            if ctx.carry is None:
                ctx.carry = {"page": 1, "since": start, "cursors": ["a"]}
            else:
                assert isinstance(ctx.carry["since"], datetime)  # loaded back through the schema
                ctx.carry = {**ctx.carry, "page": ctx.carry["page"] + 1,
                             "cursors": [*ctx.carry["cursors"], chr(ord("a") + ctx.carry["page"])]}
            ctx.set_attachment({"page": ctx.carry["page"], "rows": [1, 2.5, None, "x"]})
            if ctx.carry["page"] < 3:
                return Pause(note=f"page {ctx.carry['page']} done")
            return Complete("all pages imported")

    queue = Queue(models, [Import])
    [job_id] = enqueue(engine, queue, Import())
    assert drain(queue, engine) == 3
    assert seen == [None, {"page": 1, "since": start, "cursors": ["a"]},
                    {"page": 2, "since": start, "cursors": ["a", "b"]}]
    row = job_row(engine, models, job_id)
    assert (row.status, row.run_count, row.failure_count) == ("completed", 3, 0)
    assert row.carry == {"page": 3, "since": start.isoformat(), "cursors": ["a", "b", "c"]}
    entries = journal(engine, models, job_id)
    assert [(e.outcome, e.run_no, e.note) for e in entries] == [
        ("paused", 1, "page 1 done"), ("paused", 2, "page 2 done"), ("completed", 3, "all pages imported")]
    assert [e.attachment for e in entries] == [{"page": p, "rows": [1, 2.5, None, "x"]} for p in (1, 2, 3)]


def test_carry_survives_a_retry(engine: sa.Engine, models: Any) -> None:
    carries: list[Any] = []

    class Counting(Task):
        KIND = "counting"

        def run(self, ctx: JobContext) -> Any:
            carries.append(ctx.carry)
            ctx.carry = {"tries": (ctx.carry or {}).get("tries", 0) + 1}
            if ctx.run_count == 1:
                return Retry("again", delay=timedelta(0))
            return None

    queue = Queue(models, [Counting])
    [job_id] = enqueue(engine, queue, Counting())
    drain(queue, engine)
    assert carries == [None, {"tries": 1}]
    assert job_row(engine, models, job_id).carry == {"tries": 2}
