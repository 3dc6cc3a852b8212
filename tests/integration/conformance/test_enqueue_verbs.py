"""Conformance: the enqueue verbs of the storage seam (insert, dedup lock, merge target, merges).

Every verb runs in the caller's Session and never commits.  Lock behaviour is
observed from a second connection (``pg_try_advisory_xact_lock``, ``NOWAIT``,
``pg_locks``), never by sleeping.
"""

from __future__ import annotations

import threading
import time
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session
from support.factories import factories_for
from support.waiting import wait_until

from venturi_sa import Models, errors
from venturi_sa.models import new_job_id
from venturi_sa.storage import drivers
from venturi_sa.storage import enqueue as enqueue_store
from venturi_sa.storage.enqueue import (
    DedupLockParams,
    InsertParams,
    MergeTargetParams,
    MergeWrite,
    NewJob,
    NewJobColumns,
    RecordMergesParams,
    dedup_lock_key,
)

WAIT = 20.0


def new_job(kind: str = "k", n: int = 0, dedup_key: str | None = None) -> NewJob:
    return NewJob(id=new_job_id(), kind=kind, payload={"n": n}, priority=1, dedup_key=dedup_key)


def try_lock(engine: sa.Engine, key: int) -> bool:
    """Whether another connection could take the advisory lock ``key`` right now."""
    with engine.begin() as conn:
        return bool(conn.execute(sa.select(sa.func.pg_try_advisory_xact_lock(key))).scalar_one())


# -- insert_jobs ------------------------------------------------------------------------------------

def test_insert_returns_session_jobs_in_order_with_db_clock_times(models: Models, engine: sa.Engine) -> None:
    rows = [new_job(n=n, dedup_key="d" if n == 1 else None) for n in range(3)]
    with Session(engine) as session:
        before = session.execute(sa.select(sa.func.clock_timestamp())).scalar_one()
        jobs = enqueue_store.insert_jobs(models, session, InsertParams(jobs=rows, delay=timedelta(minutes=3)))
        after = session.execute(sa.select(sa.func.clock_timestamp())).scalar_one()
        assert [job.id for job in jobs] == [row.id for row in rows]
        assert all(job in session and job not in session.new for job in jobs)  # persistent, already flushed
        assert [job.payload for job in jobs] == [{"n": 0}, {"n": 1}, {"n": 2}]
        assert [job.dedup_key for job in jobs] == [None, "d", None]
        for job in jobs:
            assert (job.status, job.priority, job.run_count, job.carry) == ("pending", 1, 0, None)
            assert before <= job.created_at <= after
            assert job.visible_at - job.created_at == timedelta(minutes=3)
        session.rollback()
    with engine.connect() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(models.jobs_table)).scalar() == 0


def test_insert_keeps_run_at_exactly(models: Models, engine: sa.Engine) -> None:
    at = datetime(2031, 1, 2, 3, 4, 5, 678901, tzinfo=timezone(timedelta(hours=5)))
    with Session(engine) as session:
        [job] = enqueue_store.insert_jobs(models, session, InsertParams(jobs=[new_job()], run_at=at))
        assert job.visible_at == at and job.created_at < at


@pytest.mark.parametrize("kinds", [["a", "b", "a"], ["a"]], ids=["many", "one"])  # one job: the VALUES form
def test_insert_is_one_round_trip_and_its_notify_waits_for_commit(models: Models, engine: sa.Engine,
                                                                  kinds: list[str]) -> None:
    channel = models.names.channel
    listener = drivers.listen(engine, [channel])  # this engine's driver, through the adapter
    statements: list[str] = []

    def record(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        statements.append(statement)

    try:
        with Session(engine) as session:
            session.execute(sa.select(1))
            sa.event.listen(engine, "before_cursor_execute", record)
            try:
                jobs = enqueue_store.insert_jobs(models, session, InsertParams(jobs=[new_job(k) for k in kinds],
                                                                 notify_channel=channel))
            finally:
                sa.event.remove(engine, "before_cursor_execute", record)
            assert len(statements) == 1 and statements[0].lstrip().upper().startswith("INSERT")
            assert [job.kind for job in jobs] == kinds
            assert not listener.wait(0.2)  # nothing before commit
            session.commit()
        got: list[str] = []
        deadline = time.monotonic() + WAIT
        while len(got) < len(set(kinds)) and time.monotonic() < deadline:
            got += [n.payload for n in listener.wait(0.5) if n.channel == channel]
        assert sorted(got) == sorted(set(kinds))  # once per kind
        assert listener.wait(0.2) == []
    finally:
        listener.close()


def test_insert_without_a_channel_sends_no_notify(models: Models, engine: sa.Engine) -> None:
    with Session(engine) as session:
        enqueue_store.insert_jobs(models, session, InsertParams(jobs=[new_job()]))
        queued = session.execute(sa.text("SELECT pg_notification_queue_usage()")).scalar_one()
        session.commit()
    assert queued == 0


# -- insert_rows ------------------------------------------------------------------------------------

def test_insert_rows_writes_what_insert_jobs_writes_and_loads_nothing(models: Models, engine: sa.Engine) -> None:
    channel = models.names.channel
    listener = drivers.listen(engine, [channel])
    table = models.jobs_table
    statements: list[str] = []

    def record(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        statements.append(statement)

    try:
        with Session(engine) as session:
            reference = enqueue_store.insert_jobs(models, session,
                                                  InsertParams(jobs=[new_job("a", n=0)], delay=timedelta(1)))
            session.expunge_all()
            sa.event.listen(engine, "before_cursor_execute", record)
            try:
                enqueue_store.insert_rows(models, session, InsertParams(jobs=NewJobColumns(
                    ids=[new_job_id(), new_job_id()], kinds=["a", "b"], payloads=[{"n": 1}, {"n": 2}],
                    priorities=[1, 2], dedup_keys=[None, "d"]), delay=timedelta(1), notify_channel=channel))
            finally:
                sa.event.remove(engine, "before_cursor_execute", record)
            assert len(statements) == 1 and statements[0].lstrip().upper().startswith("INSERT")
            assert "RETURNING" not in statements[0].upper()
            assert not session.identity_map and not session.new
            assert not listener.wait(0.2)  # nothing before commit
            got = session.execute(sa.select(table).order_by(table.c.id)).mappings().all()
            session.commit()
        heard: list[str] = []
        deadline = time.monotonic() + WAIT
        while len(heard) < 2 and time.monotonic() < deadline:
            heard += [n.payload for n in listener.wait(0.5) if n.channel == channel]
        assert sorted(heard) == ["a", "b"]  # once per kind
    finally:
        listener.close()
    ref = {k: getattr(reference[0], k) for k in got[0] if k not in ("id", "created_at", "visible_at")}
    first, second = (dict(row) for row in got[1:])
    assert {k: first[k] for k in ref} == {**ref, "payload": {"n": 1}}
    assert (second["kind"], second["priority"], second["dedup_key"], second["payload"]) == ("b", 2, "d", {"n": 2})
    assert all(row["visible_at"] - row["created_at"] == timedelta(1) for row in got)


def test_insert_rows_rollback_leaves_nothing(models: Models, engine: sa.Engine) -> None:
    with Session(engine) as session:
        enqueue_store.insert_rows(models, session, InsertParams(jobs=NewJobColumns.of([new_job(), new_job()])))
        session.rollback()
    with engine.connect() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(models.jobs_table)).scalar() == 0


# -- lock_dedup ---------------------------------------------------------------------------------------

def test_lock_dedup_holds_each_key_until_the_transaction_ends(models: Models, engine: sa.Engine) -> None:
    prefix = models.prefix
    keys = [("k", "one"), ("k", "two")]
    held = [dedup_lock_key(prefix, kind, key) for kind, key in keys]
    other = dedup_lock_key(prefix, "k", "three")
    with Session(engine) as session:
        enqueue_store.lock_dedup_keys(models, session, DedupLockParams(keys=keys))
        assert [try_lock(engine, key) for key in held] == [False, False]
        assert try_lock(engine, other)
        session.rollback()
    assert [try_lock(engine, key) for key in held] == [True, True]


def test_lock_dedup_makes_a_second_session_wait(models: Models, engine: sa.Engine) -> None:
    params = DedupLockParams(keys=[("k", "one")])
    done = threading.Event()
    errors_seen: list[BaseException] = []

    def second() -> None:
        try:
            with Session(engine) as session:
                enqueue_store.lock_dedup_keys(models, session, params)
                done.set()
                session.rollback()
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors_seen.append(exc)

    key = dedup_lock_key(models.prefix, "k", "one") & 0xFFFF_FFFF_FFFF_FFFF
    waiting = sa.text("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
                      " AND classid::text::bigint = :hi AND objid::text::bigint = :lo AND objsubid = 1"
                      ).bindparams(hi=key >> 32, lo=key & 0xFFFF_FFFF)
    with Session(engine) as first:
        enqueue_store.lock_dedup_keys(models, first, params)
        thread = threading.Thread(target=second)
        thread.start()
        with engine.connect() as watcher:
            wait_until(lambda: watcher.execute(waiting).scalar_one() == 1, what="the second session to wait")
        assert not done.is_set()
        first.commit()
    thread.join(WAIT)
    assert done.is_set() and not errors_seen


@pytest.mark.parametrize("isolation", ["REPEATABLE READ", "SERIALIZABLE"])
def test_lock_dedup_refuses_a_stricter_isolation_and_takes_no_lock(models: Models, engine: sa.Engine,
                                                                   isolation: str) -> None:
    with Session(engine.execution_options(isolation_level=isolation)) as session:
        with pytest.raises(errors.UnsupportedIsolation, match=isolation):
            enqueue_store.lock_dedup_keys(models, session, DedupLockParams(keys=[("k", "one")]))
        assert try_lock(engine, dedup_lock_key(models.prefix, "k", "one"))


# -- find_merge_target ------------------------------------------------------------------------------------

def test_merge_target_is_the_oldest_pending_never_claimed_or_terminal(models: Models, engine: sa.Engine) -> None:
    models = models
    with Session(engine) as session, session.begin():
        JobFactory, _ = factories_for(models, session)
        for state in ("claimed", "expired", "completed", "dead"):  # older than every pending one
            JobFactory(kind="k", dedup_key="d", created_at=sa.func.now() - timedelta(hours=2), **{state: True})
        JobFactory(kind="k", dedup_key="other", created_at=sa.func.now() - timedelta(hours=2))
        JobFactory(kind="other", dedup_key="d", created_at=sa.func.now() - timedelta(hours=2))
        oldest = JobFactory(kind="k", dedup_key="d", created_at=sa.func.now() - timedelta(hours=1)).id
        JobFactory(kind="k", dedup_key="d", scheduled=True)
    with Session(engine) as session:
        target = enqueue_store.oldest_pending_sibling(models, session, MergeTargetParams(kind="k", dedup_key="d"))
        assert target is not None and target.id == oldest and target in session
        assert enqueue_store.oldest_pending_sibling(models, session,
                                                    MergeTargetParams(kind="k", dedup_key="none")) is None


def test_merge_target_is_row_locked_and_reloaded(models: Models, engine: sa.Engine) -> None:
    models = models
    with Session(engine) as session, session.begin():
        JobFactory, _ = factories_for(models, session)
        job_id = JobFactory(kind="k", dedup_key="d", payload={"v": 1}).id
    with Session(engine) as session:
        stale = session.get(models.Job, job_id)  # in the identity map with the old payload
        assert stale is not None and stale.payload == {"v": 1}
        with engine.begin() as conn:  # another transaction changes the row
            conn.execute(sa.update(models.jobs_table).where(models.jobs_table.c.id == job_id)
                         .values(payload={"v": 2}))
        target = enqueue_store.oldest_pending_sibling(models, session, MergeTargetParams(kind="k", dedup_key="d"))
        assert target is stale and target.payload == {"v": 2}
        with engine.connect() as other, pytest.raises(OperationalError, match="could not obtain lock"):
            other.execute(sa.select(models.jobs_table.c.id).where(models.jobs_table.c.id == job_id)
                          .with_for_update(nowait=True))


# -- record_merges ----------------------------------------------------------------------------------------

def test_record_merges_writes_payload_and_one_journal_row_per_note(models: Models, engine: sa.Engine) -> None:
    models = models
    with Session(engine) as session, session.begin():
        JobFactory, _ = factories_for(models, session)
        job_id = JobFactory(kind="k", dedup_key="d", payload={"v": 1}, run_count=2).id
    with Session(engine) as session, session.begin():
        target = enqueue_store.oldest_pending_sibling(models, session, MergeTargetParams(kind="k", dedup_key="d"))
        assert target is not None
        enqueue_store.record_merges(models, session, RecordMergesParams(
            merges=[MergeWrite(target=target, payload={"v": 3}, notes=("first", "second"))]))
        assert not session.new and not session.dirty  # flushed
    journal = models.journal_table
    with engine.connect() as conn:
        payload = conn.execute(sa.select(models.jobs_table.c.payload)
                               .where(models.jobs_table.c.id == job_id)).scalar_one()
        entries = conn.execute(sa.select(journal.c.outcome, journal.c.run_no, journal.c.note)
                               .where(journal.c.job_id == job_id).order_by(journal.c.id)).all()
    assert payload == {"v": 3}
    assert [tuple(e) for e in entries] == [("merged", 2, "first"), ("merged", 2, "second")]
