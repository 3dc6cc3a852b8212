"""Conformance of the operations verbs: job_row, job_view, journal_rows, history_page, stats,
cleanup_cutoff, cleanup_count, cleanup_batch and admin_apply.

Each verb runs on both runner kinds (an ORM Session and a Core Connection),
in a transaction the test opens; rows are built with the factories and
committed first.  Real PostgreSQL, no mocks, no sleeps: concurrency is two
open transactions and ``NOWAIT`` / ``SKIP LOCKED``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.orm import Session
from support.drivers import OpenRunner
from support.factories import db_now, factories_for

from venturi_sa import Models
from venturi_sa.storage import admin as admin_store
from venturi_sa.storage import cleanup as cleanup_store
from venturi_sa.storage import history as history_store
from venturi_sa.storage import stats as stats_store
from venturi_sa.storage import timeouts as timeouts_store
from venturi_sa.storage.admin import KILL, RELEASE, REQUEUE, AdminAction, AdminParams
from venturi_sa.storage.cleanup import CleanupParams, CutoffParams
from venturi_sa.storage.faults import sqlstate
from venturi_sa.storage.history import HistoryParams, JobParams
from venturi_sa.storage.stats import StatsParams
from venturi_sa.storage.timeouts import TimeoutsParams

OLD, RECENT = -timedelta(days=10), -timedelta(hours=1)




@contextmanager
def built(engine: sa.Engine, models: Models) -> Iterator[tuple[Any, Any]]:
    """``(JobFactory, JournalEntryFactory)`` on a fresh Session, committed on exit."""
    with Session(engine) as session:
        yield factories_for(models, session)
        session.commit()


def rows_of(engine: sa.Engine, table: sa.Table, *where: Any) -> list[sa.Row[Any]]:
    with engine.connect() as conn:
        return list(conn.execute(sa.select(table).where(*where)))


def job(engine: sa.Engine, models: Models, job_id: str) -> sa.Row[Any]:
    (row,) = rows_of(engine, models.jobs_table, models.jobs_table.c.id == job_id)
    return row


def journal_of(engine: sa.Engine, models: Models, job_id: str) -> list[sa.Row[Any]]:
    c = models.journal_table.c
    return sorted(rows_of(engine, models.journal_table, c.job_id == job_id), key=lambda r: r.id)


def ids(rows: Any) -> list[str]:
    return [r.id for r in rows]


# -- job_row / journal_rows ----------------------------------------------------------------

def test_job_row_is_the_whole_row_or_none(engine: sa.Engine, models: Models,
                                          runner: OpenRunner) -> None:
    with built(engine, models) as (Job, _):
        job_id = Job(claimed=True, kind="send", payload={"to": "a@b"}, dedup_key="k").id
    with runner() as r:
        row = history_store.fetch_job(models, r, JobParams(job_id=job_id))
        missing = history_store.fetch_job(models, r, JobParams(job_id="01J00000000000000000000000"))
    assert missing is None
    assert row is not None
    assert tuple(row._mapping) == tuple(c.name for c in models.jobs_table.c)
    assert dict(row._mapping) == dict(job(engine, models, job_id)._mapping)
    assert (row.status, row.kind, row.payload, row.dedup_key, row.run_count) == (
        "claimed", "send", {"to": "a@b"}, "k", 1)


def test_job_view_is_the_row_the_fire_that_inserted_it_and_its_time_limit(
        engine: sa.Engine, models: Models, runner: OpenRunner) -> None:
    with built(engine, models) as (Job, _):
        fired_id, plain_id = Job(kind="report").id, Job(kind="report").id
    fire_at = datetime(2026, 3, 29, 1, 0, tzinfo=timezone.utc)
    with engine.begin() as conn:
        conn.execute(sa.insert(models.schedules_table).values(
            name="nightly", kind="report", payload={}, priority=1, timing="cron:0 3 * * *", tz="Europe/Berlin",
            catch_up="latest", overlap="allow", next_at=fire_at, updated=sa.func.now()))
        conn.execute(sa.insert(models.fires_table).values(schedule="nightly", fire_at=fire_at, job_id=fired_id,
                                                          fired_at=fire_at + timedelta(seconds=1)))
    with runner() as r:
        timeouts_store.set_timeouts(models, r, TimeoutsParams(job_ids=[fired_id], timeout=timedelta(minutes=2)))
        fired = history_store.fetch_job_view(models, r, JobParams(job_id=fired_id))
        plain = history_store.fetch_job_view(models, r, JobParams(job_id=plain_id))
        missing = history_store.fetch_job_view(models, r, JobParams(job_id="01J00000000000000000000000"))
    assert missing is None and fired is not None and plain is not None
    columns = tuple(c.name for c in models.jobs_table.c)
    assert tuple(fired._mapping) == (*columns, "fire_schedule", "fire_at", "fired_at", "timeout")
    assert {c: fired._mapping[c] for c in columns} == dict(job(engine, models, fired_id)._mapping)
    assert (fired.fire_schedule, fired.fire_at, fired.fired_at) == ("nightly", fire_at,
                                                                    fire_at + timedelta(seconds=1))
    assert fired.timeout == timedelta(minutes=2)
    assert (plain.id, plain.fire_schedule, plain.fire_at, plain.fired_at, plain.timeout) == (
        plain_id, None, None, None, None)


def test_journal_rows_are_the_jobs_own_oldest_first(engine: sa.Engine, models: Models,
                                                    runner: OpenRunner) -> None:
    with built(engine, models) as (Job, Entry):
        mine, other, quiet = Job(completed=True, run_count=3), Job(completed=True), Job()
        for run_no, outcome in ((1, "retried"), (2, "paused"), (3, "completed")):
            Entry(job=mine, run_no=run_no, outcome=outcome, note=f"run {run_no}")
        Entry(job=other)
        mine_id, quiet_id = mine.id, quiet.id
    with runner() as r:
        entries = history_store.fetch_journal(models, r, JobParams(job_id=mine_id))
        none_yet = history_store.fetch_journal(models, r, JobParams(job_id=quiet_id))
        unknown = history_store.fetch_journal(models, r, JobParams(job_id="01J00000000000000000000000"))
    assert [(e.run_no, e.outcome, e.note) for e in entries] == [
        (1, "retried", "run 1"), (2, "paused", "run 2"), (3, "completed", "run 3")]
    assert [e.id for e in entries] == sorted(e.id for e in entries)
    assert {e.job_id for e in entries} == {mine_id}
    assert tuple(entries[0]._mapping) == tuple(c.name for c in models.journal_table.c)
    assert list(none_yet) == [] and list(unknown) == []


# -- history_page ----------------------------------------------------------------------------

def test_history_page_walks_created_at_then_id_descending(engine: sa.Engine, models: Models,
                                                          runner: OpenRunner) -> None:
    with built(engine, models) as (Job, _):
        made = [Job(created_at=db_now(-timedelta(minutes=m))).id for m in (5, 1, 3, 4, 2)]
        tied = [Job(created_at=db_now(-timedelta(minutes=10))).id for _ in range(3)]
    everything = rows_of(engine, models.jobs_table)
    expected = ids(sorted(everything, key=lambda r: (r.created_at, r.id), reverse=True))
    assert set(expected) == {*made, *tied} and expected[-3:] == sorted(tied, reverse=True)

    walked: list[str] = []
    after: tuple[datetime, str] | None = None
    with runner() as r:
        while True:
            page = history_store.fetch_history(models, r, HistoryParams(limit=3, after=after))
            assert len(page) <= 4  # limit + 1: the extra row only says "more follow"
            walked += ids(page[:3])
            if len(page) <= 3:
                break
            after = (page[2].created_at, page[2].id)
    assert walked == expected


def test_history_page_filters(engine: sa.Engine, models: Models,
                              runner: OpenRunner) -> None:
    with built(engine, models) as (Job, _):
        a3 = Job(kind="a", completed=True, finished_at=db_now(-timedelta(hours=3))).id
        a2 = Job(kind="a", completed=True, finished_at=db_now(-timedelta(hours=2))).id
        b1 = Job(kind="b", completed=True, finished_at=db_now(-timedelta(hours=1))).id
        dead = Job(kind="a", dead=True, finished_at=db_now(-timedelta(hours=2))).id
        pending, claimed = Job(kind="a").id, Job(kind="b", claimed=True).id
    t2 = job(engine, models, a2).finished_at

    def page(**filters: Any) -> set[str]:
        with runner() as r:
            return set(ids(history_store.fetch_history(models, r, HistoryParams(limit=100, **filters))))

    assert page() == {a3, a2, b1, dead, pending, claimed}
    assert page(statuses=("completed",)) == {a3, a2, b1}
    assert page(statuses=("pending", "claimed")) == {pending, claimed}
    assert page(kind="a") == {a3, a2, dead, pending}
    assert page(statuses=("completed",), kind="b") == {b1}
    assert page(finished_after=t2) == {a2, b1, dead}  # inclusive
    assert page(finished_before=t2) == {a3}  # exclusive
    assert page(finished_after=t2, finished_before=t2 + timedelta(microseconds=1)) == {a2, dead}


# -- stats -----------------------------------------------------------------------------------

def test_stats_counts_eligible_scheduled_and_expired_leases(engine: sa.Engine, models: Models,
                                                            runner: OpenRunner) -> None:
    with built(engine, models) as (Job, _):
        Job(kind="a", visible_at=db_now(-timedelta(minutes=5)))
        Job(kind="a")
        Job(kind="a", scheduled=True)
        Job(kind="b", claimed=True)
        Job(kind="b", expired=True)
        Job(kind="b", expired=True)
        Job(kind="a", completed=True)
        Job(kind="c", dead=True)
    with runner() as r:
        raw = stats_store.read_stats(models, r, StatsParams())
        now = r.execute(sa.select(sa.func.now())).scalar_one()
    assert raw.as_of == now  # the transaction's clock
    assert sorted(raw.counts) == [("claimed", "b", 3), ("completed", "a", 1), ("dead", "c", 1),
                                  ("pending", "a", 3)]
    (pending_a,) = raw.pending
    assert (pending_a.kind, pending_a.eligible, pending_a.scheduled) == ("a", 2, 1)
    assert pending_a.oldest_eligible_age is not None
    assert pending_a.oldest_eligible_age >= timedelta(minutes=5)
    assert list(raw.expired) == [("b", 2)]


def test_stats_of_an_empty_queue(models: Models, runner: OpenRunner) -> None:
    with runner() as r:
        raw = stats_store.read_stats(models, r, StatsParams())
    assert (list(raw.counts), list(raw.pending), list(raw.expired)) == ([], [], [])


# -- cleanup_cutoff / cleanup_count / cleanup_batch ------------------------------------------------

def test_cleanup_cutoff_is_the_database_clock_minus_older_than(models: Models, runner: OpenRunner) -> None:
    with runner() as r:
        cutoff = cleanup_store.db_cutoff(r, CutoffParams(older_than=timedelta(days=7)))
        now = r.execute(sa.select(sa.func.now())).scalar_one()
    assert cutoff == now - timedelta(days=7)
    assert cutoff.tzinfo is not None


@pytest.fixture
def retained(engine: sa.Engine, models: Models) -> dict[str, str]:
    """Old and recent terminal jobs (each with a journal row), and live rows with an old ``finished_at``."""
    made: dict[str, str] = {}
    with built(engine, models) as (Job, Entry):
        def make(name: str, kind: str = "mail", **traits: Any) -> None:
            row = Job(kind=kind, **traits)
            Entry(job=row, run_no=1, outcome="retried")
            made[name] = row.id

        for i in range(4):
            make(f"old_completed_{i}", completed=True, finished_at=db_now(OLD - timedelta(minutes=i)))
        make("old_dead", dead=True, finished_at=db_now(OLD))
        make("old_sms", kind="sms", completed=True, finished_at=db_now(OLD))
        make("recent", completed=True, finished_at=db_now(RECENT))
        # Live rows whose finished_at is (wrongly) old: the status predicate must still spare them.
        make("pending", finished_at=db_now(OLD))
        make("claimed", claimed=True, finished_at=db_now(OLD))
        make("expired", expired=True, finished_at=db_now(OLD))
    return made


def _cutoff(engine: sa.Engine) -> datetime:
    with engine.connect() as conn:
        value: datetime = conn.execute(sa.select(sa.func.now() - timedelta(days=1))).scalar_one()
    return value


def test_cleanup_count_matches_only_old_terminal_rows(engine: sa.Engine, models: Models,
                                                      runner: OpenRunner, retained: dict[str, str]) -> None:
    cutoff = _cutoff(engine)

    def count(**filters: Any) -> int:
        with runner() as r:
            return cleanup_store.count_matching(models, r, CleanupParams(cutoff=cutoff, batch_size=1, **filters))

    assert count() == 6  # 4 old completed + old dead + old sms; never recent or live ones
    assert count(statuses=("dead",)) == 1
    assert count(statuses=("completed",), kind="sms") == 1
    assert count(kind="mail") == 5
    assert len(rows_of(engine, models.jobs_table)) == len(retained)  # counting deleted nothing


def test_cleanup_batch_is_bounded_oldest_first_and_cascades(engine: sa.Engine, models: Models, runner: OpenRunner,
                                                            retained: dict[str, str]) -> None:
    finished = {r.id: r.finished_at for r in rows_of(engine, models.jobs_table)}
    params = CleanupParams(cutoff=_cutoff(engine), statuses=("completed",), kind="mail", batch_size=3)
    with runner() as r:
        deleted, newest = cleanup_store.delete_batch(models, r, params)
    assert deleted == 3
    left = set(ids(rows_of(engine, models.jobs_table)))
    assert set(retained.values()) - left == {retained[f"old_completed_{i}"] for i in (1, 2, 3)}  # oldest
    assert newest == finished[retained["old_completed_1"]]
    assert {e.job_id for e in rows_of(engine, models.journal_table)} == left  # the journal went along

    with runner() as r:
        deleted, last = cleanup_store.delete_batch(models, r, CleanupParams(
            cutoff=params.cutoff, statuses=params.statuses, kind=params.kind, batch_size=3, floor=newest))
        again = cleanup_store.delete_batch(models, r, params)
    assert (deleted, last) == (1, finished[retained["old_completed_0"]])
    assert again == (0, None)
    kept = {retained[n] for n in ("pending", "claimed", "expired", "recent", "old_dead", "old_sms")}
    assert set(ids(rows_of(engine, models.jobs_table))) == kept


def test_cleanup_batch_skips_rows_locked_elsewhere(engine: sa.Engine, models: Models,
                                                   runner: OpenRunner, retained: dict[str, str]) -> None:
    locked = retained["old_dead"]
    params = CleanupParams(cutoff=_cutoff(engine), batch_size=100)
    with engine.connect() as holder:
        holder.execute(sa.select(models.Job.id).where(models.Job.id == locked).with_for_update())
        with runner() as r:
            deleted, _ = cleanup_store.delete_batch(models, r, params)
        holder.rollback()
    assert deleted == 5
    assert locked in ids(rows_of(engine, models.jobs_table))


# -- admin_apply -------------------------------------------------------------------------------

STARTS = {"pending": {}, "claimed": {"claimed": True}, "expired": {"expired": True},
          "completed": {"completed": True}, "dead": {"dead": True, "failure_count": 5}}


def _one(engine: sa.Engine, models: Models, state: str) -> str:
    with built(engine, models) as (Job, _):
        job_id: str = Job(kind="mail", **STARTS[state]).id
    return job_id


@pytest.mark.parametrize(("action", "state"), [(REQUEUE, "dead"), (KILL, "pending"), (RELEASE, "claimed"),
                                               (RELEASE, "expired")])
def test_admin_apply_transitions_and_journals(engine: sa.Engine, models: Models,
                                              runner: OpenRunner, action: AdminAction, state: str) -> None:
    job_id = _one(engine, models, state)
    before = job(engine, models, job_id)
    with runner() as r:
        result = admin_store.apply(models, r, AdminParams(job_id=job_id, action=action, note="ticket 7"))
        now = r.execute(sa.select(sa.func.clock_timestamp())).scalar_one()
    assert result.applied and result.job is not None
    after = job(engine, models, job_id)
    assert dict(result.job._mapping) == dict(after._mapping)
    assert after.status == action.to_status.value
    assert (after.claimed_by, after.claim_expires_at) == (None, None)
    assert (after.run_count, after.payload) == (before.run_count, before.payload)
    if action.to_status.terminal:
        assert after.finished_at is not None
    else:
        assert after.finished_at is None and after.visible_at <= now
        assert after.failure_count == (0 if action is REQUEUE else before.failure_count)
    (entry,) = journal_of(engine, models, job_id)
    assert (entry.outcome, entry.run_no, entry.kind, entry.attachment) == (
        action.outcome.value, before.run_count, "mail", None)
    assert entry.note == f"{action.verb} by operator: ticket 7"


@pytest.mark.parametrize("action", [REQUEUE, KILL, RELEASE], ids=lambda a: a.name)
def test_admin_apply_is_guarded_by_status(engine: sa.Engine, models: Models,
                                          runner: OpenRunner, action: AdminAction) -> None:
    for state in STARTS:
        if state == action.from_status.value or (action is RELEASE and state == "expired"):
            continue
        job_id = _one(engine, models, state)
        before = job(engine, models, job_id)
        with runner() as r:
            result = admin_store.apply(models, r, AdminParams(job_id=job_id, action=action))
        assert not result.applied, state
        assert result.job is not None and dict(result.job._mapping) == dict(before._mapping)
        assert dict(job(engine, models, job_id)._mapping) == dict(before._mapping)
        assert journal_of(engine, models, job_id) == []


def test_admin_apply_on_an_unknown_job(models: Models, runner: OpenRunner) -> None:
    with runner() as r:
        result = admin_store.apply(models, r, AdminParams(job_id="01J00000000000000000000000", action=KILL))
    assert (result.job, result.applied) == (None, False)


def test_admin_apply_never_commits(engine: sa.Engine, models: Models,
                                   runner: OpenRunner) -> None:
    job_id = _one(engine, models, "pending")

    class Abort(Exception):
        pass

    with pytest.raises(Abort), runner() as r:
        assert admin_store.apply(models, r, AdminParams(job_id=job_id, action=KILL)).applied
        raise Abort
    assert job(engine, models, job_id).status == "pending"
    assert journal_of(engine, models, job_id) == []


@pytest.mark.parametrize("action", [KILL, RELEASE], ids=lambda a: a.name)
def test_admin_apply_holds_the_row_lock_until_the_transaction_ends(
        engine: sa.Engine, models: Models, runner: OpenRunner, action: AdminAction) -> None:
    """Applied (KILL on pending) or refused (RELEASE on pending), the row stays locked until commit."""
    job_id = _one(engine, models, "pending")
    nowait = sa.select(models.Job.id).where(models.Job.id == job_id).with_for_update(nowait=True)
    with runner() as r:
        admin_store.apply(models, r, AdminParams(job_id=job_id, action=action))
        with engine.connect() as other:
            with pytest.raises(sa.exc.OperationalError) as locked:
                other.execute(nowait)
            other.rollback()
    assert sqlstate(locked.value) == "55P03"  # lock_not_available
    with engine.connect() as other:
        assert other.execute(nowait).scalar_one() == job_id
        other.rollback()
