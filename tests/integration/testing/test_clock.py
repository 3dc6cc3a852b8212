"""The database test clock: delays, backoff, pauses and leases move without sleeping."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
import sqlalchemy as sa
from sqlalchemy.orm import Session
from support.notes import notes

from venturi_sa import Models, Queue
from venturi_sa.errors import InvalidOption
from venturi_sa.storage import claim as claim_sql
from venturi_sa.storage import clock as dbclock
from venturi_sa.storage.backend import backend_for
from venturi_sa.storage.params import ClaimParams, RecoverParams
from venturi_sa.testing import Clock, assert_enqueued, clock, drain, refute_enqueued


def test_a_delayed_job_runs_once_the_clock_passes_it(
        no_rows_left: None, venturi_queue_session: Session, venturi_queue: Queue, venturi_clock: Clock) -> None:
    s, q = venturi_queue_session, venturi_queue
    start = venturi_clock.freeze()
    job = q.enqueue(s, q.registry.get("note")(body="later"), delay=timedelta(hours=3))
    assert job.visible_at == start + timedelta(hours=3)  # enqueue read the frozen clock
    venturi_clock.advance(timedelta(hours=2, minutes=59))
    assert drain(s, q).total == 0
    venturi_clock.advance(timedelta(minutes=1))
    assert drain(s, q).completed == 1 and notes(s) == ["later"]
    assert job.finished_at == start + timedelta(hours=3)


def test_backoff_and_pause_without_sleeping(venturi_queue_session: Session, venturi_queue: Queue) -> None:
    s, q = venturi_queue_session, venturi_queue
    c = clock(s)
    t0 = c.set(datetime(2030, 1, 1, tzinfo=timezone.utc))
    flaky = q.enqueue(s, q.registry.get("flaky")())
    nap = q.enqueue(s, q.registry.get("nap")())
    first = drain(s, q, fail_fast=False)
    assert (first.retried, first.paused) == (1, 1)
    assert flaky.visible_at == t0 + timedelta(minutes=10)  # Flaky.backoff
    assert (nap.visible_at, nap.carry) == (t0 + timedelta(hours=1), {"slept": 1})
    c.advance(timedelta(minutes=10))
    assert [r.kind for r in drain(s, q).runs] == ["flaky"]
    c.advance(timedelta(minutes=50))
    assert [(r.kind, r.note) for r in drain(s, q).runs] == [("nap", "rested")]
    assert notes(s) == ["flaky done", "woke after 1"]
    refute_enqueued(s, q)


def test_expired_leases_are_recovered_by_the_clock(venturi_queue_session: Session, venturi_queue: Queue,
                                                   models: Models) -> None:
    s, q = venturi_queue_session, venturi_queue
    c = clock(s)
    c.freeze()
    job = q.enqueue(s, q.registry.get("note")(body="x"))
    backend = backend_for(models)
    params = ClaimParams(worker_id="gone:1", kinds=["note"], limit=1, leases={}, default_lease=timedelta(seconds=60))
    assert [j.id for j in backend.claim(s, params)] == [job.id]
    recover = RecoverParams(max_failures={"note": 5})
    c.advance(timedelta(seconds=59))
    assert backend.recover(s, recover) == []
    c.advance(timedelta(seconds=2))
    assert [r.id for r in backend.recover(s, recover)] == [job.id]
    assert_enqueued(s, q, "note")


def test_the_clock_is_the_transactions_own(venturi_queue_session: Session, engine: sa.Engine) -> None:
    c = clock(venturi_queue_session)
    c.set(datetime(2001, 2, 3, tzinfo=timezone.utc))
    assert venturi_queue_session.execute(sa.select(sa.func.now())).scalar_one().year == 2001
    with engine.connect() as other:
        assert other.execute(sa.select(sa.func.now())).scalar_one().year > 2001
    savepoint = venturi_queue_session.begin_nested()
    c.advance(timedelta(days=365 * 3))
    assert c.now().year == 2004
    savepoint.rollback()
    assert c.now().year == 2001
    c.reset()
    assert not c.frozen and c.now().year > 2001
    with pytest.raises(InvalidOption, match="timezone-aware"):
        c.set(datetime(2001, 1, 1))


def test_the_clock_ends_with_the_transaction(engine: sa.Engine) -> None:
    with Session(engine) as s:
        clock(s).set(datetime(2001, 2, 3, tzinfo=timezone.utc))
        assert dbclock.engaged(s)
        s.rollback()
        assert not dbclock.engaged(s) and s.execute(sa.select(sa.func.now())).scalar_one().year > 2001


def test_production_statements_do_not_change(models: Models) -> None:
    """The clock shadows functions at run time; the statements venturi sends are the same text."""
    params = ClaimParams(worker_id="w", kinds=["a", "b"], limit=5, leases={}, default_lease=timedelta(seconds=60))
    sql = str(claim_sql.claim_statement(models, params).compile(dialect=sa.dialects.postgresql.dialect()))
    assert "visible_at <= now()" in sql and "claim_expires_at=(now() + " in sql.replace(" = ", "=")
    assert "venturi" not in sql.replace(models.prefix, "") and "current_setting" not in sql
