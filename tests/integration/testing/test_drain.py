"""drain: the session's jobs, claimed and run inside the test's transaction by the worker's own code."""

from __future__ import annotations

import traceback
from datetime import timedelta

import pytest
import sqlalchemy as sa
from sqlalchemy.orm import Session
from support.notes import notes

from venturi_sa import Models, Queue
from venturi_sa.states import Outcome
from venturi_sa.testing import DrainError, assert_enqueued, drain, refute_enqueued
from venturi_sa.testing.plugin import Drainer


def _journal(s: Session, models: Models, job_id: str) -> list[tuple[int, str, str | None]]:
    j = models.journal_table
    return [tuple(r) for r in s.execute(sa.select(j.c.run_no, j.c.outcome, j.c.note)
                                        .where(j.c.job_id == job_id).order_by(j.c.id))]  # type: ignore[misc]


def test_drain_runs_uncommitted_jobs_with_the_real_outcome_writes(
        no_rows_left: None, venturi_queue_session: Session, venturi_queue: Queue, venturi_drain: Drainer,
        models: Models, engine: sa.Engine) -> None:
    s, q = venturi_queue_session, venturi_queue
    job = q.enqueue(s, q.registry.get("note")(body="hello"))
    result = venturi_drain()
    assert (result.completed, result.total) == (1, 1)
    assert notes(s) == ["hello"]  # the handler wrote into the test's own transaction
    assert (job.status, job.run_count, job.claimed_by) == ("completed", 1, None)
    assert job.finished_at is not None
    assert _journal(s, models, job.id) == [(1, "completed", None)]
    with engine.connect() as other:  # nothing is committed
        assert other.execute(sa.select(sa.func.count()).select_from(models.jobs_table)).scalar_one() == 0


def test_fail_fast_reraises_with_the_handler_traceback_and_records_nothing(
        no_rows_left: None, venturi_queue_session: Session, venturi_queue: Queue, models: Models) -> None:
    s, q = venturi_queue_session, venturi_queue
    job = q.enqueue(s, q.registry.get("boom")())
    with pytest.raises(ValueError, match="boom") as raised:
        drain(s, q)
    frames = traceback.extract_tb(raised.value.__traceback__)
    assert frames[-1].name == "run" and "notes.py" in frames[-1].filename
    assert (job.status, job.run_count, job.failure_count) == ("pending", 0, 0)
    assert _journal(s, models, job.id) == [] and notes(s) == []
    assert_enqueued(s, q, "boom")


def test_without_fail_fast_a_raise_is_a_retry_and_its_writes_are_rolled_back(
        venturi_queue_session: Session, venturi_queue: Queue, models: Models) -> None:
    s, q = venturi_queue_session, venturi_queue
    job = q.enqueue(s, q.registry.get("boom")())
    result = drain(s, q, fail_fast=False)
    assert (result.retried, result.runs[0].note) == (1, "ValueError: boom")
    assert (job.status, job.failure_count) == ("pending", 1)
    assert notes(s) == []  # "before the boom" went with the failed run's savepoint
    assert _journal(s, models, job.id) == [(1, "retried", "ValueError: boom")]


def test_recursive_runs_jobs_enqueued_by_jobs_and_one_pass_does_not(
        venturi_queue_session: Session, venturi_queue: Queue) -> None:
    s, q = venturi_queue_session, venturi_queue
    q.enqueue(s, q.registry.get("spawn")(n=3))
    one = drain(s, q, recursive=False)
    assert (one.completed, notes(s)) == (1, ["spawn 3"])
    assert_enqueued(s, q, "spawn", payload={"n": 2}, count=1)
    rest = drain(s, q)
    assert [r.kind for r in rest.runs] == ["spawn", "spawn", "note"]
    assert notes(s) == ["spawn 3", "spawn 2", "spawn 1", "leaf"]
    refute_enqueued(s, q)


def test_scheduled_jobs_wait_unless_with_scheduled(venturi_queue_session: Session, venturi_queue: Queue) -> None:
    s, q = venturi_queue_session, venturi_queue
    q.enqueue(s, q.registry.get("note")(body="tomorrow"), delay=timedelta(days=1))
    assert drain(s, q).total == 0
    assert drain(s, q, with_scheduled=True).completed == 1
    assert notes(s) == ["tomorrow"]


def test_kinds_limit_the_drain(venturi_queue_session: Session, venturi_queue: Queue) -> None:
    s, q = venturi_queue_session, venturi_queue
    q.enqueue_many(s, [q.registry.get("note")(body="n"), q.registry.get("boom")()])
    assert drain(s, q, kinds=["note"]).completed == 1
    assert_enqueued(s, q, "boom")
    refute_enqueued(s, q, "note")


def test_a_retry_is_not_rerun_until_its_backoff_is_due(venturi_queue_session: Session, venturi_queue: Queue) -> None:
    s, q = venturi_queue_session, venturi_queue
    q.enqueue(s, q.registry.get("flaky")())
    result = drain(s, q, fail_fast=False)
    assert (result.retried, result.completed) == (1, 0)
    assert_enqueued(s, q, "flaky", scheduled_within=(timedelta(minutes=10), timedelta(seconds=5)))


def test_max_runs_stops_a_job_that_never_ends(venturi_queue_session: Session, models: Models) -> None:
    from venturi_sa import Pause, Task

    class Forever(Task):
        KIND = "forever"

        def run(self, ctx: object) -> Pause:
            return Pause()

    q = Queue(models, [Forever])
    job = q.enqueue(venturi_queue_session, Forever())
    with pytest.raises(DrainError, match="made 5 runs and jobs are still eligible"):
        drain(venturi_queue_session, q, max_runs=5)
    assert (job.status, job.run_count) == ("pending", 5)


def test_dead_counts_and_poison_payloads(venturi_queue_session: Session, venturi_queue: Queue, models: Models) -> None:
    s, q = venturi_queue_session, venturi_queue
    s.add(models.Job(kind="note", payload={"wrong": 1}))
    result = drain(s, q)
    assert result.dead == 1 and result.runs[0].outcome is Outcome.DEAD
    assert "cannot be decoded" in (result.runs[0].note or "")
