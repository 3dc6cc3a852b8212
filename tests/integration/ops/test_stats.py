"""Stats match hand-counted fixtures built with factory-boy."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from support.factories import db_now
from support.ops import factory_session

from venturi_sa import Queue


@pytest.fixture
def queue(models):  # type: ignore[no-untyped-def]
    return Queue(models)


def test_empty_queue(engine, models, queue):
    stats = queue.stats(engine)
    assert stats.total == 0 and stats.by_kind == {}
    assert stats.by_status == {"pending": 0, "claimed": 0, "completed": 0, "dead": 0}
    assert stats.oldest_eligible_age is None
    assert json.loads(json.dumps(stats.as_dict()))["oldest_eligible_age_seconds"] is None


def test_counts_match_hand_counted_fixtures(engine, models, queue):
    with factory_session(engine, models) as (Job, _):
        # mail: 3 eligible (one waiting 10 minutes), 2 scheduled, 1 live claim, 2 expired, 4 done, 1 dead
        Job.create_batch(2, kind="mail")
        Job(kind="mail", visible_at=db_now(-timedelta(minutes=10)))
        Job.create_batch(2, kind="mail", scheduled=True)
        Job(kind="mail", claimed=True)
        Job.create_batch(2, kind="mail", expired=True)
        Job.create_batch(4, kind="mail", completed=True)
        Job(kind="mail", dead=True)
        # sms: 1 eligible waiting 3 minutes, 1 scheduled, 3 dead
        Job(kind="sms", visible_at=db_now(-timedelta(minutes=3)))
        Job(kind="sms", scheduled=True)
        Job.create_batch(3, kind="sms", dead=True)
        # report: only completed
        Job.create_batch(5, kind="report", completed=True)

    stats = queue.stats(engine)

    held = dict.fromkeys(("backoff", "sleeping", "waiting_for_signal", "waiting"), 0)  # none here
    assert stats.by_kind == {
        "mail": {"total": 13, "pending": 5, "eligible": 3, "scheduled": 2, "claimed": 3,
                 "expired_leases": 2, "completed": 4, "dead": 1, **held},
        "report": {"total": 5, "pending": 0, "eligible": 0, "scheduled": 0, "claimed": 0,
                   "expired_leases": 0, "completed": 5, "dead": 0, **held},
        "sms": {"total": 5, "pending": 2, "eligible": 1, "scheduled": 1, "claimed": 0,
                "expired_leases": 0, "completed": 0, "dead": 3, **held},
    }
    assert stats.by_status == {"pending": 7, "claimed": 3, "completed": 9, "dead": 4}
    assert (stats.total, stats.pending, stats.eligible, stats.scheduled) == (23, 7, 4, 3)
    assert (stats.in_flight, stats.expired_leases, stats.completed, stats.dead) == (3, 2, 9, 4)
    # Ages are measured on the database clock from visible_at; the fixtures were made
    # moments ago, so each age is its offset plus that short while.
    assert timedelta(minutes=10) <= stats.oldest_eligible_age < timedelta(minutes=11)
    assert stats.oldest_eligible_age == stats.oldest_eligible_age_by_kind["mail"]
    assert timedelta(minutes=3) <= stats.oldest_eligible_age_by_kind["sms"] < timedelta(minutes=4)
    data = json.loads(json.dumps(stats.as_dict()))
    assert 600 <= data["oldest_eligible_age_seconds"] < 660
    assert data["by_kind"]["sms"]["dead"] == 3


def test_stats_follow_admin_actions(engine, models, queue):
    with factory_session(engine, models) as (Job, _):
        victim = Job(kind="mail").id
    assert queue.stats(engine).eligible == 1
    queue.kill(engine, victim)
    stats = queue.stats(engine)
    assert (stats.eligible, stats.dead, stats.oldest_eligible_age) == (0, 1, None)


def test_unmigrated_queue_says_so(engine, prefix):
    from venturi_sa import SchemaNotMigrated, make_models

    queue = Queue(make_models(prefix))  # no alembic_venturi.upgrade for this prefix
    with pytest.raises(SchemaNotMigrated, match=f"venturi migrate --prefix {prefix}"):
        queue.stats(engine)
    with pytest.raises(SchemaNotMigrated):
        queue.history(engine)
