"""Conformance of the worker's verbs: claim, finish_many, renew, recover, soonest_visible, ping.

Rows are built with the factories and committed; each verb runs in a
transaction the test opens.  Concurrency is shown with two open
transactions (a row lock held by one, SKIP LOCKED in the other), never sleeps.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.orm import Session
from support.factories import db_now, factories_for

from venturi_sa.states import Outcome
from venturi_sa.storage.backend import Backend
from venturi_sa.storage.params import (
    ClaimedJob,
    ClaimParams,
    Fence,
    FinishManyParams,
    FinishParams,
    InvalidOutcome,
    RecoverParams,
    RenewParams,
    SoonestParams,
)

LEASE = timedelta(seconds=60)


def seed(engine: sa.Engine, models: Any, *rows: dict[str, Any]) -> list[str]:
    """Insert job rows (factory traits as keys) and commit; their ids in order."""
    with Session(engine) as session:
        job_factory, _ = factories_for(models, session)
        ids = [job_factory(**row).id for row in rows]
        session.commit()
    return ids


def claim(backend: Backend, engine: sa.Engine, kinds: list[str], limit: int, worker: str = "w:1",
          caps: dict[str, int] | None = None) -> list[ClaimedJob]:
    with engine.begin() as conn:
        return backend.claim(conn, ClaimParams(worker_id=worker, kinds=kinds, limit=limit, leases={},
                                               default_lease=LEASE, caps=caps or {}))


def row(engine: sa.Engine, models: Any, job_id: str) -> Any:
    with engine.connect() as conn:
        return conn.execute(sa.select(models.jobs_table).where(models.jobs_table.c.id == job_id)).one()


def journal(engine: sa.Engine, models: Any, job_id: str) -> list[tuple[int, str]]:
    j = models.journal_table.c
    with engine.connect() as conn:
        return [(r.run_no, r.outcome) for r in conn.execute(
            sa.select(j.run_no, j.outcome).where(j.job_id == job_id).order_by(j.id))]


# -- claim ---------------------------------------------------------------------------------

def test_claim_takes_eligible_jobs_in_priority_then_age_order(backend: Backend, engine: sa.Engine,
                                                              models: Any) -> None:
    low, high, later, other = seed(engine, models, {"priority": 2}, {"priority": 0}, {"scheduled": True},
                                   {"kind": "other"})
    got = claim(backend, engine, ["noop"], 10)
    assert [j.id for j in got] == [high, low]
    assert all(j.run_count == 1 and j.claimed_by == "w:1" for j in got)
    assert row(engine, models, later).status == "pending" and row(engine, models, other).status == "pending"
    assert row(engine, models, high).claim_expires_at is not None


def test_claim_never_takes_more_than_the_limit_and_skips_locked_rows(backend: Backend, engine: sa.Engine,
                                                                     models: Any) -> None:
    ids = seed(engine, models, *({} for _ in range(5)))
    with Session(engine) as holder, holder.begin():
        holder.execute(sa.select(models.Job.id).where(models.Job.id == ids[0]).with_for_update())
        got = claim(backend, engine, ["noop"], 3)
    assert len(got) == 3 and ids[0] not in {j.id for j in got}


def test_a_capped_kind_is_claimed_by_priority_beside_an_uncapped_backlog(backend: Backend, engine: sa.Engine,
                                                                         models: Any) -> None:
    backlog = seed(engine, models, *({"kind": "bulk", "priority": 2} for _ in range(20)))
    urgent = seed(engine, models, *({"kind": "capped", "priority": 0} for _ in range(5)))
    got = claim(backend, engine, ["bulk", "capped"], 10, caps={"capped": 3})
    kinds = [j.kind for j in got]
    assert kinds[:3] == ["capped"] * 3 and kinds.count("capped") == 3  # first by priority, held to the cap
    assert len(got) == 10 and {j.id for j in got if j.kind == "bulk"} <= set(backlog)
    assert {j.id for j in got if j.kind == "capped"} <= set(urgent)


def test_a_capped_kind_with_no_room_is_not_claimed(backend: Backend, engine: sa.Engine, models: Any) -> None:
    seed(engine, models, {"kind": "capped", "priority": 0}, {"kind": "bulk"})
    assert [j.kind for j in claim(backend, engine, ["bulk", "capped"], 5, caps={"capped": 0})] == ["bulk"]


# -- finish_many ------------------------------------------------------------------------------

def test_finish_many_writes_fenced_outcomes_and_skips_broken_fences(backend: Backend, engine: sa.Engine,
                                                                    models: Any) -> None:
    seed(engine, models, {}, {})
    a, b = claim(backend, engine, ["noop"], 2)
    stale = Fence(job_id=b.id, kind=b.kind, claimed_by="someone-else", run_count=b.run_count)
    with engine.begin() as conn:
        written = backend.finish_many(conn, FinishManyParams(outcomes=[
            FinishParams(fence=a.fence, outcome=Outcome.COMPLETED, note="done"),
            FinishParams(fence=stale, outcome=Outcome.COMPLETED)]))
    assert written == {a.fence}
    assert row(engine, models, a.id).status == "completed" and row(engine, models, b.id).status == "claimed"
    assert journal(engine, models, a.id) == [(1, "completed")] and journal(engine, models, b.id) == []


def test_finish_many_with_two_runs_of_one_job_journals_only_the_current_run(backend: Backend,
                                                                            engine: sa.Engine, models: Any) -> None:
    seed(engine, models, {})
    [job] = claim(backend, engine, ["noop"], 1)
    old = Fence(job_id=job.id, kind=job.kind, claimed_by=job.claimed_by, run_count=job.run_count - 1)
    with engine.begin() as conn:
        written = backend.finish_many(conn, FinishManyParams(outcomes=[
            FinishParams(fence=old, outcome=Outcome.COMPLETED),
            FinishParams(fence=job.fence, outcome=Outcome.RETRIED, failure=True, delay=timedelta(seconds=30))]))
    assert written == {job.fence}
    assert journal(engine, models, job.id) == [(1, "retried")]
    r = row(engine, models, job.id)
    assert (r.status, r.failure_count) == ("pending", 1)


@pytest.mark.parametrize("bad", [
    {"note": {"n": 1}}, {"note": "nul\x00"}, {"note": "x" * 5000}, {"delay": 5},
    {"visible_at": __import__("datetime").datetime(2030, 1, 1)}, {"attachment": {"k": "nul\x00"}},
    {"attachment": {1, 2}}, {"save_carry": True, "carry": float("nan")},
], ids=["dict-note", "nul-note", "long-note", "int-delay", "naive-time", "nul-json", "set", "nan-carry"])
def test_outcome_params_refuse_values_a_batch_cannot_store(bad: dict[str, Any]) -> None:
    fence = Fence(job_id="j", kind="k", claimed_by="w", run_count=1)
    with pytest.raises(InvalidOutcome):
        FinishParams(fence=fence, outcome=Outcome.PAUSED, **bad)


# -- renew ------------------------------------------------------------------------------------

def test_renew_extends_held_leases_and_reports_lost_ones(backend: Backend, engine: sa.Engine, models: Any) -> None:
    seed(engine, models, {}, {})
    kept, gone = claim(backend, engine, ["noop"], 2)
    with engine.begin() as conn:  # an operator release: the claim of `gone` is over
        conn.execute(sa.update(models.jobs_table).where(models.jobs_table.c.id == gone.id)
                     .values(status="pending", claimed_by=None, claim_expires_at=None))
    before = row(engine, models, kept.id).claim_expires_at
    with engine.begin() as conn:
        result = backend.renew(conn, RenewParams(worker_id="w:1", runs=[kept.fence, gone.fence],
                                                 lease=timedelta(minutes=10)))
    assert result.renewed == {kept.fence} and result.lost == {gone.fence}
    assert row(engine, models, kept.id).claim_expires_at > before + timedelta(minutes=5)


def test_renew_skips_a_locked_row_without_waiting_or_calling_it_lost(backend: Backend, engine: sa.Engine,
                                                                     models: Any) -> None:
    seed(engine, models, {})
    [job] = claim(backend, engine, ["noop"], 1)
    with Session(engine) as holder, holder.begin():
        holder.execute(sa.select(models.Job.id).where(models.Job.id == job.id).with_for_update())
        with engine.begin() as conn:
            conn.execute(sa.text("SET LOCAL lock_timeout = '2s'"))  # would fail if renewal waited
            result = backend.renew(conn, RenewParams(worker_id="w:1", runs=[job.fence], lease=LEASE))
    assert not result.renewed and not result.lost


# -- recover ----------------------------------------------------------------------------------

def test_recover_uses_each_kinds_own_backstop_and_only_known_kinds(backend: Backend, engine: sa.Engine,
                                                                   models: Any) -> None:
    strict, patient, unknown = seed(engine, models, {"expired": True, "kind": "strict"},
                                    {"expired": True, "kind": "patient", "failure_count": 4},
                                    {"expired": True, "kind": "unknown"})
    with engine.begin() as conn:
        recovered = backend.recover(conn, RecoverParams(max_failures={"strict": 1, "patient": 25}))
    assert {r.id: r.dead for r in recovered} == {strict: True, patient: False}
    assert row(engine, models, strict).status == "dead" and row(engine, models, patient).status == "pending"
    assert row(engine, models, unknown).status == "claimed"
    assert journal(engine, models, patient) == [(1, "stale-recovered")]


def test_recover_leaves_live_leases_alone(backend: Backend, engine: sa.Engine, models: Any) -> None:
    [live] = seed(engine, models, {"claimed": True})
    with engine.begin() as conn:
        assert backend.recover(conn, RecoverParams(max_failures={"noop": 5})) == []
    assert row(engine, models, live).status == "claimed"


# -- soonest_visible and ping -----------------------------------------------------------------

def test_soonest_visible_is_the_next_future_visible_at_of_the_kinds(backend: Backend, engine: sa.Engine,
                                                                    models: Any) -> None:
    with Session(engine) as session:
        job_factory, _ = factories_for(models, session)
        job_factory(visible_at=db_now(timedelta(seconds=30)))
        job_factory(visible_at=db_now(timedelta(seconds=5)), kind="other")
        session.commit()
    with engine.connect() as conn:
        soonest = backend.soonest_visible(conn, SoonestParams(kinds=["noop"]))
        assert soonest is not None and 20 < soonest <= 30
        assert backend.soonest_visible(conn, SoonestParams(kinds=["absent"])) is None
        backend.ping(conn)
