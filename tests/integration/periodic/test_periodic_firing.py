"""Firing in one process: catch-up after simulated downtime, overlap, DST on the database, run now, pause."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
import sqlalchemy as sa
from support.periodic import (
    Tick,
    aligned,
    backdate,
    db_now,
    fire_times,
    jobs_of,
    schedule_row,
    steady_fire_time,
    tick_queue,
)

from venturi_sa import Models, Queue, VenturiError
from venturi_sa.periodic import all_within, fire_due, fired_by, policies, reconcile
from venturi_sa.storage.backend import backend_for
from venturi_sa.storage.params import ClaimParams

MINUTE = timedelta(minutes=1)


def declared(engine: sa.Engine, models: Models, **options: object) -> tuple[Queue, str]:
    queue = tick_queue(models.prefix)
    queue.schedule(Tick(n=1), name="s", **options)
    reconcile(queue, engine)
    return queue, "s"


@pytest.mark.parametrize(("policy", "fired"), [
    ("latest", {1}), ("skip", {1}), (all_within(timedelta(minutes=10)), {10, 11})])
def test_catch_up_after_an_hour_of_downtime(engine: sa.Engine, models: Models, policy: str,
                                            fired: set[int]) -> None:
    """61 fire times are due (an hour's worth and the current one): one run, one on-time run, or a window."""
    queue, name = declared(engine, models, every=MINUTE, catch_up=policy)
    current = steady_fire_time(engine, MINUTE)
    backdate(engine, models, name, current - timedelta(hours=1))
    results = fire_due(queue, engine)
    row = schedule_row(engine, models, name)
    assert row.fired in fired and row.fired + row.skipped == 61
    assert sum(len(r.fires) for r in results) == row.fired
    assert fire_times(engine, models, name)[-1] == current  # the latest fire time always among the fired
    assert len(jobs_of(engine, models)) == row.fired == len(fire_times(engine, models, name))
    assert row.next_at > db_now(engine) - MINUTE
    assert fire_due(queue, engine) == []  # nothing more is due


def test_a_fire_time_not_yet_due_on_the_database_clock_does_not_fire(engine: sa.Engine, models: Models) -> None:
    queue, name = declared(engine, models, every=timedelta(hours=1))
    assert fire_due(queue, engine) == []
    assert jobs_of(engine, models) == []


@pytest.mark.parametrize("running", [False, True], ids=["pending", "running"])
@pytest.mark.parametrize(("overlap", "fired"), [("allow", 2), ("skip", 1), ("queue", 1)])
def test_overlap_with_a_previous_job_still_pending_or_running(engine: sa.Engine, models: Models, overlap: str,
                                                              fired: int, running: bool) -> None:
    queue, name = declared(engine, models, every=MINUTE, overlap=overlap)
    first = queue.run_schedule_now(engine, name)  # the previous run
    if running:
        with engine.begin() as conn:
            backend_for(models).claim(conn, ClaimParams(worker_id="w", kinds=["tick"], limit=1, leases={},
                                                        default_lease=timedelta(minutes=5)))
    now = steady_fire_time(engine, MINUTE)
    backdate(engine, models, name, now)
    results = fire_due(queue, engine)
    assert len(jobs_of(engine, models)) == fired
    row = schedule_row(engine, models, name)
    if overlap == "queue":
        assert results[0].deferred and row.next_at == now and row.last_job == first
        with engine.begin() as conn:  # the previous run finishes: the waiting fire time fires
            conn.execute(sa.update(models.jobs_table).values(status="completed", finished_at=sa.func.now(),
                                                             claimed_by=None, claim_expires_at=None))
        fire_due(queue, engine)
        assert len(jobs_of(engine, models)) == 2 and now in fire_times(engine, models, name)
    elif overlap == "skip":
        assert row.skipped == 1 and row.next_at == now + MINUTE and row.last_job == first
    else:
        assert row.last_job != first and now in fire_times(engine, models, name)


def test_daily_berlin_schedule_over_both_dst_days_on_the_database(engine: sa.Engine, models: Models) -> None:
    queue, name = declared(engine, models, cron="30 2 * * *", tz="Europe/Berlin",
                           catch_up=all_within(timedelta(days=3650)))
    backdate(engine, models, name, datetime(2026, 3, 28, 1, 30, tzinfo=timezone.utc))
    calls = 0
    while fire_due(queue, engine):  # one batch (100 fire times) per call
        calls += 1
    assert calls > 1
    times = set(fire_times(engine, models, name))
    utc = timezone.utc
    assert datetime(2026, 3, 29, 1, 0, tzinfo=utc) in times  # the gap: once, at 03:00 CEST
    assert datetime(2026, 3, 29, 0, 30, tzinfo=utc) not in times
    assert datetime(2026, 3, 29, 1, 30, tzinfo=utc) not in times
    assert datetime(2026, 10, 25, 0, 30, tzinfo=utc) in times  # the fold: once, at 02:30 CEST
    assert datetime(2026, 10, 25, 1, 30, tzinfo=utc) not in times
    assert len(times) == len(jobs_of(engine, models)) == schedule_row(engine, models, name).fired


def test_run_now_pause_resume_and_which_fire_made_a_job(engine: sa.Engine, models: Models) -> None:
    queue, name = declared(engine, models, every=timedelta(hours=1))
    before = schedule_row(engine, models, name)
    job_id = queue.run_schedule_now(engine, name)
    after = schedule_row(engine, models, name)
    assert after.next_at == before.next_at and after.last_job == job_id and after.fired == 1
    fire = fired_by(models, engine, job_id)
    assert fire is not None and fire.schedule == name
    assert fired_by(models, engine, "01NOTAJOB0000000000000000") is None

    queue.pause_schedule(engine, name)
    backdate(engine, models, name, aligned(db_now(engine), timedelta(hours=1)) - timedelta(hours=3))
    assert fire_due(queue, engine) == []  # paused: not fired
    queue.resume_schedule(engine, name)
    assert schedule_row(engine, models, name).next_at > db_now(engine)  # no catch-up of paused time
    (info,) = queue.list_schedules(engine)
    assert (info.name, info.paused, info.last_job, info.last_status, info.fired) == (name, False, job_id,
                                                                                    "pending", 1)
    with pytest.raises(VenturiError, match="no schedule named 'nope'"):
        queue.run_schedule_now(engine, "nope")
    with pytest.raises(VenturiError, match="no schedule named 'nope'"):
        queue.pause_schedule(engine, "nope")


def test_a_duplicate_fire_is_refused_by_the_unique_key(engine: sa.Engine, models: Models) -> None:
    """Even with the compare-and-set bypassed, ``(schedule, fire_at)`` admits one job per fire time."""
    queue, name = declared(engine, models, every=MINUTE)
    due = aligned(db_now(engine), MINUTE)
    backdate(engine, models, name, due)
    fire_due(queue, engine)
    with engine.connect() as conn:  # ``due``, or the next minute if one began meanwhile (the latest is fired)
        fired = conn.execute(sa.select(models.fires_table.c.fire_at)
                             .where(models.fires_table.c.schedule == name)).scalar_one()
    backdate(engine, models, name, fired)  # as if the advance had been lost
    with pytest.raises(sa.exc.IntegrityError):
        with engine.begin() as conn:
            conn.execute(sa.insert(models.fires_table).values(schedule=name, fire_at=fired, job_id="x"))
    fire_due(queue, engine)  # logged, not fired again, the schedule moves on
    assert len(jobs_of(engine, models)) == 1
    assert schedule_row(engine, models, name).next_at > fired


def test_one_call_fires_each_schedule_at_most_once(engine: sa.Engine, models: Models) -> None:
    """A call ends after one transaction per schedule, so a worker reports (and counts) its fires as it goes,
    even when its schedules come due again as fast as it fires them; the rest of a catch-up stays due."""
    queue = tick_queue(models.prefix)
    for name in ("a", "b"):
        queue.schedule(Tick(n=1), every=MINUTE, name=name, catch_up=all_within(timedelta(days=1)))
    reconcile(queue, engine)
    for name in ("a", "b"):
        backdate(engine, models, name, aligned(db_now(engine), MINUTE) - timedelta(hours=10))  # 600 due each
    results = fire_due(queue, engine)
    assert sorted(r.name for r in results) == ["a", "b"]
    assert [len(r.fires) for r in results] == [policies.BATCH] * 2
    assert sorted(r.name for r in fire_due(queue, engine)) == ["a", "b"]  # the next call takes the next batch
