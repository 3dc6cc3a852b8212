"""Retention cleanup: only old terminal rows go, with their journal, in short batches."""

from __future__ import annotations

from datetime import timedelta

import pytest
import sqlalchemy as sa
from support.factories import db_now
from support.ops import count, factory_session

from venturi_sa import InvalidOption, Queue

OLD = -timedelta(days=10)
RECENT = -timedelta(hours=1)


@pytest.fixture
def queue(models):  # type: ignore[no-untyped-def]
    return Queue(models)


@pytest.fixture
def rows(engine, models):  # type: ignore[no-untyped-def]
    """Old and recent terminal jobs with journals, and live jobs of every kind of liveness."""
    with factory_session(engine, models) as (Job, Entry):
        def make(name, kind="mail", **traits):  # type: ignore[no-untyped-def]
            job = Job(kind=kind, **traits)
            made[name] = job.id
            Entry(job=job, run_no=1, outcome="retried")
            return job

        made: dict[str, str] = {}
        make("old_completed", completed=True, finished_at=db_now(OLD))
        make("old_dead", dead=True, finished_at=db_now(OLD))
        make("old_sms", kind="sms", completed=True, finished_at=db_now(OLD))
        make("recent_completed", completed=True, finished_at=db_now(RECENT))
        make("recent_dead", dead=True, finished_at=db_now(RECENT))
        make("pending")
        make("scheduled", scheduled=True)
        make("claimed", claimed=True)
        make("expired", expired=True)
        # A live row carrying an old finished_at (e.g. written by hand): still never deleted.
        make("odd_pending", pending=True, finished_at=db_now(OLD))
    return made


def _left(engine, models):  # type: ignore[no-untyped-def]
    with engine.connect() as conn:
        return set(conn.execute(sa.text(f"SELECT id FROM {models.names.jobs}")).scalars())


def _journal_jobs(engine, models):  # type: ignore[no-untyped-def]
    with engine.connect() as conn:
        return set(conn.execute(sa.text(f"SELECT job_id FROM {models.names.journal}")).scalars())


def test_deletes_only_old_terminal_rows_with_their_journal(engine, models, queue, rows):
    deleted = queue.cleanup(engine, older_than=timedelta(days=7))

    gone = {rows["old_completed"], rows["old_dead"], rows["old_sms"]}
    assert deleted == 3
    assert _left(engine, models) == set(rows.values()) - gone
    assert _journal_jobs(engine, models) == set(rows.values()) - gone


def test_explicit_cutoff_keeps_rows_finished_after_it(engine, models, queue, rows):
    with engine.connect() as conn:
        cutoff = conn.execute(sa.select(sa.func.now() - sa.text("interval '2 hours'"))).scalar_one()
    assert queue.cleanup(engine, before=cutoff) == 3
    # A cutoff after everything removes the recent terminal rows too, and still no live row.
    assert queue.cleanup(engine, older_than=timedelta(0)) == 2
    assert _left(engine, models) == {rows[n] for n in ("pending", "scheduled", "claimed", "expired",
                                                       "odd_pending")}


def test_status_and_kind_filters(engine, models, queue, rows):
    assert queue.cleanup(engine, older_than=timedelta(days=7), status="dead") == 1
    assert rows["old_dead"] not in _left(engine, models)
    assert queue.cleanup(engine, older_than=timedelta(days=7), kind="sms") == 1
    assert rows["old_sms"] not in _left(engine, models)
    assert queue.cleanup(engine, older_than=timedelta(days=7), status=["completed"], kind="mail") == 1
    assert queue.cleanup(engine, older_than=timedelta(days=7)) == 0


def test_dry_run_counts_and_deletes_nothing(engine, models, queue, rows):
    calls: list[int] = []
    assert queue.cleanup(engine, older_than=timedelta(days=7), dry_run=True, progress=calls.append) == 3
    assert queue.cleanup(engine, older_than=timedelta(0), status="dead", dry_run=True) == 2
    assert _left(engine, models) == set(rows.values())
    assert _journal_jobs(engine, models) == set(rows.values())
    assert calls == []


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"older_than": timedelta(days=1), "status": "pending"}, "'pending'.*completed, dead"),
    ({"older_than": timedelta(days=1), "status": ["dead", "claimed"]}, "'claimed'"),
    ({}, "exactly one of before= or older_than="),
    ({"older_than": timedelta(days=1), "before": "x"}, "exactly one"),
    ({"older_than": timedelta(days=-1)}, "non-negative"),
    ({"older_than": timedelta(days=1), "batch_size": 0}, "batch_size"),
])
def test_bad_options_are_refused_before_anything_is_deleted(engine, models, queue, rows, kwargs, message):
    with pytest.raises(InvalidOption, match=message):
        queue.cleanup(engine, **kwargs)
    assert _left(engine, models) == set(rows.values())


def test_naive_cutoff_is_refused(engine, models, queue):
    with engine.connect() as conn:
        now = conn.execute(sa.select(sa.func.now())).scalar_one()
    with pytest.raises(InvalidOption, match="timezone-aware"):
        queue.cleanup(engine, before=now.replace(tzinfo=None))


def test_works_in_batches_each_committed_on_its_own(engine, models, queue):
    with factory_session(engine, models) as (Job, Entry):
        for job in Job.create_batch(25, completed=True, finished_at=db_now(OLD)):
            Entry(job=job, run_no=1)
        live = Job(kind="mail").id
    jobs, journal = models.names.jobs, models.names.journal
    seen: list[tuple[int, int, int]] = []

    def progress(total: int) -> None:
        # Another connection already sees this batch's deletes: it committed on its own.
        seen.append((total, count(engine, f"SELECT count(*) FROM {jobs}"),
                     count(engine, f"SELECT count(*) FROM {journal}")))

    assert queue.cleanup(engine, older_than=timedelta(days=1), batch_size=10, progress=progress) == 25
    assert seen == [(10, 16, 15), (20, 6, 5), (25, 1, 0)]
    assert _left(engine, models) == {live}


def test_rows_locked_by_another_transaction_are_skipped_not_waited_for(engine, models, queue, rows):
    with engine.connect() as other:
        other.execute(sa.text(f"SELECT 1 FROM {models.names.jobs} WHERE id = :id FOR UPDATE"),
                      {"id": rows["old_dead"]})
        assert queue.cleanup(engine, older_than=timedelta(days=7)) == 2
        other.rollback()
    assert rows["old_dead"] in _left(engine, models)
    assert queue.cleanup(engine, older_than=timedelta(days=7)) == 1
