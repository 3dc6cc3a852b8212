"""Fencing and stale recovery: a run that lost its lease commits nothing; expired leases come back."""

from __future__ import annotations

import logging
import threading
from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.orm import Session
from support.factories import factories_for
from support.queues import drain, outcomes, side_rows, side_table, side_write
from support.waiting import Events, wait_until
from support.workers import enqueue, job_row, journal, running, steal

from venturi_sa import Complete, JobContext, Queue, Task, Worker


@pytest.mark.parametrize("use_session", [True, False], ids=["with-ctx-session", "batched"])
def test_late_outcome_of_a_lost_lease_is_discarded(engine: sa.Engine, models: Any, prefix: str,
                                                   caplog: pytest.LogCaptureFixture, use_session: bool) -> None:
    side = side_table(engine, prefix)

    class Slow(Task):
        KIND = "slow"

        def run(self, ctx: JobContext) -> Complete:
            if use_session:
                side_write(ctx.session, side, ctx.job_id, ctx.run_count, "late")
                ctx.session.flush()
            steal(engine, models, ctx.job_id, "slow", thief="thief-host:1")
            return Complete("finished late")

    queue = Queue(models, [Slow])
    [job_id] = enqueue(engine, queue, Slow())
    with caplog.at_level(logging.WARNING, logger="venturi_sa"):
        drain(queue, engine, concurrency=1)
    row = job_row(engine, models, job_id)
    # the thief's claim stands; the late run wrote neither its outcome nor its session work
    assert (row.status, row.claimed_by, row.run_count, row.failure_count) == ("claimed", "thief-host:1", 2, 1)
    assert outcomes(engine, models, job_id) == ["stale-recovered"]
    assert side_rows(engine, side) == []
    lost = [r for r in caplog.records if r.levelno == logging.WARNING and job_id in r.getMessage()
            and "lease lost" in r.getMessage()]
    assert lost, [r.getMessage() for r in caplog.records]


def test_expired_lease_is_recovered_and_the_job_runs_again(engine: sa.Engine, models: Any) -> None:
    ran: list[int] = []

    class Again(Task):
        KIND = "again"
        max_failures = 3

        def run(self, ctx: JobContext) -> None:
            ran.append(ctx.run_count)

    queue = Queue(models, [Again])
    with Session(engine) as session, session.begin():
        JobFactory, _ = factories_for(models, session)
        job_id = JobFactory(expired=True, kind="again").id
        live = JobFactory(claimed=True, kind="again").id  # a live lease is left alone
    events = Events()
    worker = Worker(queue, engine, concurrency=2, poll_interval=0.2, recover_interval=0.1, on_event=events)
    with running(worker):
        events.wait_for("finished", job_id=job_id)
    row = job_row(engine, models, job_id)
    assert (row.status, row.run_count, row.failure_count) == ("completed", 2, 1)
    entries = journal(engine, models, job_id)
    assert [(e.outcome, e.run_no) for e in entries] == [("stale-recovered", 1), ("completed", 2)]
    assert "ghost-host" in entries[0].note
    assert ran == [2]
    assert job_row(engine, models, live).status == "claimed" and journal(engine, models, live) == []


def test_stale_recovery_at_the_backstop_is_dead(engine: sa.Engine, models: Any) -> None:
    class Fragile(Task):
        KIND = "fragile"
        max_failures = 3

        def run(self, ctx: JobContext) -> None:
            raise AssertionError("must not run")

    queue = Queue(models, [Fragile])
    with Session(engine) as session, session.begin():
        JobFactory, _ = factories_for(models, session)
        job_id = JobFactory(expired=True, kind="fragile", failure_count=2, run_count=3).id
    events = Events()
    worker = Worker(queue, engine, poll_interval=0.2, recover_interval=0.1, on_event=events)
    with running(worker):
        wait_until(lambda: job_row(engine, models, job_id).status != "claimed", what="recovery")
    row = job_row(engine, models, job_id)
    assert (row.status, row.failure_count, row.run_count) == ("dead", 3, 3)
    assert row.finished_at is not None and row.claimed_by is None
    [entry] = journal(engine, models, job_id)
    assert (entry.outcome, entry.run_no) == ("stale-recovered", 3) and "dead" in entry.note
    assert not [e for e in events.seen if e[1] == "claimed"]


def test_lease_is_renewed_while_the_handler_runs(engine: sa.Engine, models: Any) -> None:
    release = threading.Event()
    started = threading.Event()

    class Long(Task):
        KIND = "long"
        lease = timedelta(seconds=1)

        def run(self, ctx: JobContext) -> None:
            started.set()
            release.wait(20)

    queue = Queue(models, [Long])
    [job_id] = enqueue(engine, queue, Long())
    events = Events()
    # a second worker recovers stale leases aggressively the whole time
    other = Worker(queue, engine, poll_interval=0.2, recover_interval=0.1, kinds=[])
    worker = Worker(queue, engine, poll_interval=0.2, recover_interval=0.1, on_event=events)
    with running(other), running(worker):
        assert started.wait(20)
        first = job_row(engine, models, job_id).claim_expires_at
        wait_until(lambda: job_row(engine, models, job_id).claim_expires_at > first + timedelta(seconds=1.5),
                   what="the lease to be renewed past its first expiry")
        release.set()
        events.wait_for("finished", job_id=job_id)
    assert outcomes(engine, models, job_id) == ["completed"]
    assert job_row(engine, models, job_id).run_count == 1
