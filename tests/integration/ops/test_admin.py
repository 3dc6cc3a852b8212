"""Admin actions: requeue a dead job, kill a pending one, release a stuck claim."""

from __future__ import annotations

from datetime import timedelta

import pytest
import sqlalchemy as sa
from sqlalchemy.orm import Session
from support.factories import db_now
from support.ops import count, factory_session

from venturi_sa import InvalidTransition, JobNotFound, Queue
from venturi_sa.states import Outcome
from venturi_sa.storage import outcomes as outcome_sql
from venturi_sa.storage.params import Fence, FinishParams


@pytest.fixture
def queue(models):  # type: ignore[no-untyped-def]
    return Queue(models)


def _make(engine, models, **traits):  # type: ignore[no-untyped-def]
    with factory_session(engine, models) as (Job, _):
        job = Job(kind="mail", **traits)
        job_id = job.id
    return job_id


def _db_now(engine):  # type: ignore[no-untyped-def]
    with engine.connect() as conn:
        return conn.execute(sa.select(sa.func.now())).scalar_one()


def test_requeue_dead_job_gets_fresh_tries_and_a_journal_row(engine, models, queue):
    job_id = _make(engine, models, dead=True, run_count=5, failure_count=5,
                   visible_at=db_now(timedelta(hours=2)))

    info = queue.requeue(engine, job_id, note="fixed the SMTP password")

    assert info.status == "pending"
    assert info.failure_count == 0
    assert info.run_count == 5
    assert info.finished_at is None
    assert info.claimed_by is None and info.claim_expires_at is None
    assert info.visible_at <= _db_now(engine)
    assert queue.get_job(engine, job_id).info == info  # a JobView's plain JobInfo part
    last = queue.journal(engine, job_id)[-1]
    assert (last.outcome, last.run_no, last.note) == ("released", 5, "requeued by operator: fixed the SMTP password")


def test_kill_pending_job(engine, models, queue):
    job_id = _make(engine, models, scheduled=True)

    info = queue.kill(engine, job_id)

    assert info.status == "dead"
    assert info.finished_at is not None
    assert [(e.outcome, e.run_no, e.note) for e in queue.journal(engine, job_id)] == [
        ("dead", 0, "killed by operator")]


def test_release_stuck_claim_counts_no_failure_and_breaks_the_old_fence(engine, models, queue):
    job_id = _make(engine, models, claimed=True, claimed_by="gone-host:1", run_count=2, failure_count=1)

    info = queue.release(engine, job_id, note="host gone-host was decommissioned")

    assert (info.status, info.claimed_by, info.claim_expires_at) == ("pending", None, None)
    assert (info.run_count, info.failure_count) == (2, 1)
    assert info.visible_at <= _db_now(engine)
    entry = queue.journal(engine, job_id)[-1]
    assert (entry.outcome, entry.run_no) == ("released", 2)
    assert entry.note == "released by operator: host gone-host was decommissioned"
    # The worker that held the claim, if it ever comes back, writes nothing.
    fence = Fence(job_id=job_id, kind="mail", claimed_by="gone-host:1", run_count=2)
    with Session(engine) as session:
        assert not outcome_sql.finish(models, session, FinishParams(fence=fence, outcome=Outcome.COMPLETED))
        session.rollback()
    assert queue.get_job(engine, job_id).status == "pending"


@pytest.mark.parametrize(
    ("action", "traits", "current"),
    [
        ("requeue", {"pending": True}, "pending"),
        ("requeue", {"completed": True}, "completed"),
        ("kill", {"claimed": True}, "claimed"),
        ("kill", {"dead": True}, "dead"),
        ("release", {"pending": True}, "pending"),
        ("release", {"completed": True}, "completed"),
    ],
)
def test_wrong_status_is_refused_and_changes_nothing(engine, models, queue, action, traits, current):
    job_id = _make(engine, models, **traits)
    before = queue.get_job(engine, job_id)

    with pytest.raises(InvalidTransition) as err:
        getattr(queue, action)(engine, job_id, note="oops")

    message = str(err.value)
    assert job_id in message and current in message and action in message
    assert queue.get_job(engine, job_id) == before
    assert queue.journal(engine, job_id) == []


@pytest.mark.parametrize("action", ["requeue", "kill", "release"])
def test_unknown_job_id(engine, models, queue, action):
    with pytest.raises(JobNotFound, match="01NOSUCHJOB"):
        getattr(queue, action)(engine, "01NOSUCHJOB")
    assert count(engine, f"SELECT count(*) FROM {models.names.journal}") == 0
