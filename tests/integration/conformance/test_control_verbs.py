"""Conformance of the runtime-control verbs: pause_kind, resume_kind, pauses, pause_of, cancel,
cancel_candidates, edit_pending, explain_facts, set_timeouts (read back by job_view), the paused-kind filter of claim
(kinds and kind patterns), the time limit claim returns and the cancel requests of renew.

Per sync driver and per runner kind (an ORM Session or a Core Connection),
in transactions the tests open; rows are built with the factories.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session
from support.drivers import OpenRunner
from support.factories import factories_for

from venturi_sa import Models
from venturi_sa.storage import cancels as cancels_store
from venturi_sa.storage import claim as claim_store
from venturi_sa.storage import edits as edits_store
from venturi_sa.storage import explain as explain_store
from venturi_sa.storage import history as history_store
from venturi_sa.storage import leases as leases_store
from venturi_sa.storage import pauses as pauses_store
from venturi_sa.storage import timeouts as timeouts_store
from venturi_sa.storage.cancels import CancelParams
from venturi_sa.storage.edits import EditParams
from venturi_sa.storage.history import JobParams
from venturi_sa.storage.params import ClaimParams, Fence, RenewParams, Runner
from venturi_sa.storage.pauses import PauseParams, ResumeParams
from venturi_sa.storage.timeouts import TimeoutsParams

MINUTE = timedelta(minutes=1)




def build(engine: sa.Engine, models: Models, **traits: Any) -> Any:
    with Session(engine, expire_on_commit=False) as session:
        job = factories_for(models, session)[0](**traits)
        session.commit()
        return job


def claim_params(kinds: list[str]) -> ClaimParams:
    return ClaimParams(worker_id="w", kinds=kinds, limit=10, leases={}, default_lease=MINUTE)


def test_a_pause_leaves_its_kind_out_of_the_claim_until_resumed(models: Models, runner: OpenRunner,
                                                                engine: sa.Engine) -> None:
    a, b = build(engine, models, kind="a"), build(engine, models, kind="b")
    with runner() as r:
        row = pauses_store.pause(models, r, PauseParams(kind="a", actor="ops", reason="why"))
        assert row is not None and (row.kind, row.actor, row.resume_at) == ("a", "ops", None)
    with runner() as r:
        assert [p.kind for p in pauses_store.pauses(models, r)] == ["a"]
        assert [j.id for j in claim_store.claim(models, r, claim_params(["a", "b"]))] == [b.id]
    with runner() as r:
        assert pauses_store.resume(models, r, ResumeParams(kind="a", actor="ops2")).resumed_by == "ops2"
        assert pauses_store.resume(models, r, ResumeParams(kind="a", actor="ops2")) is None
    with runner() as r:
        assert [j.id for j in claim_store.claim(models, r, claim_params(["a"]))] == [a.id]
        assert pauses_store.pauses(models, r) == [] and len(pauses_store.pauses(models, r, in_force_only=False)) == 1


def test_a_pause_of_every_kind_and_a_pause_that_ended(models: Models, runner: OpenRunner,
                                                      engine: sa.Engine) -> None:
    build(engine, models, kind="a")
    with runner() as r:
        pauses_store.pause(models, r, PauseParams(kind="*", actor="ops"))
        assert claim_store.claim(models, r, claim_params(["a"])) == []
    with runner() as r:  # a pause whose end has passed is no longer in force
        r.execute(sa.update(models.pauses_table).values(resume_at=sa.func.now() - MINUTE))
        assert len(claim_store.claim(models, r, claim_params(["a"]))) == 1
    with runner() as r:  # an end in the past is refused, nothing written
        assert pauses_store.pause(models, r, PauseParams(kind="a", actor="ops", until=db_time(r) - MINUTE)) is None


def db_time(r: Runner) -> Any:
    return r.execute(sa.select(sa.func.now())).scalar_one()


def test_cancel_by_status(models: Models, runner: OpenRunner, engine: sa.Engine) -> None:
    pending, claimed = build(engine, models, pending=True), build(engine, models, claimed=True)
    done = build(engine, models, completed=True)
    with runner() as r:
        result = cancels_store.cancel(models, r, CancelParams(job_id=pending.id, actor="a", note="n"))
        assert result.done and result.job is not None and result.job.status == "dead"
        result = cancels_store.cancel(models, r, CancelParams(job_id=claimed.id, actor="a"))
        assert result.requested and result.job is not None and result.job.status == "claimed"
        again = cancels_store.cancel(models, r, CancelParams(job_id=claimed.id, actor="b"))
        assert again.requested  # the first request stands
        finished = cancels_store.cancel(models, r, CancelParams(job_id=done.id, actor="a"))
        assert not finished.done and not finished.requested
        assert cancels_store.cancel(models, r, CancelParams(job_id="nope", actor="a")).job is None
        assert cancels_store.non_terminal_ids(models, r, kind="noop", limit=10) == [claimed.id]
    with engine.connect() as conn:
        [request] = conn.execute(sa.select(models.cancels_table)).all()
    assert (request.job_id, request.actor, request.run_no) == (claimed.id, "a", 1)


def test_renew_reports_cancel_requests_of_held_runs(models: Models, engine: sa.Engine) -> None:
    claimed = build(engine, models, claimed=True)
    fence = Fence(job_id=claimed.id, kind=claimed.kind, claimed_by=claimed.claimed_by, run_count=1)
    params = RenewParams(worker_id=claimed.claimed_by, runs=[fence], lease=MINUTE)
    with engine.begin() as conn:
        assert dict(leases_store.renew(models, conn, params).cancels) == {}
        cancels_store.cancel(models, conn, CancelParams(job_id=claimed.id, actor="ops", note="stop"))
    with engine.begin() as conn:
        result = leases_store.renew(models, conn, params)
    assert fence in result.renewed and dict(result.cancels) == {fence: "cancelled by ops while running: stop"}


def test_edit_pending_only(models: Models, runner: OpenRunner, engine: sa.Engine) -> None:
    pending, claimed = build(engine, models, scheduled=True), build(engine, models, claimed=True)
    with runner() as r:
        result = edits_store.edit(models, r, EditParams(job_id=pending.id, actor="ops", priority=0, visible_now=True,
                                                    changes=("priority -> 0", "run now")))
        assert result.applied and result.job is not None and result.job.priority == 0
        refused = edits_store.edit(models, r, EditParams(job_id=claimed.id, actor="ops", priority=0))
        assert not refused.applied and refused.job is not None and refused.job.status == "claimed"
    with engine.connect() as conn:
        notes = conn.execute(sa.select(models.journal_table.c.note)).scalars().all()
    assert notes == ["edited by ops: priority -> 0; run now"]


def test_explain_facts(models: Models, runner: OpenRunner, engine: sa.Engine) -> None:
    first, second = build(engine, models, kind="k"), build(engine, models, kind="k")
    with runner() as r:
        facts = explain_store.explain_facts(models, r, second.id, activity_window=timedelta(minutes=10))
        assert facts.job is not None and facts.ahead == 1 and facts.pause is None and not facts.recent_activity
        assert explain_store.explain_facts(models, r, "nope", activity_window=timedelta(minutes=10)).job is None
        assert explain_store.explain_facts(models, r, first.id, activity_window=timedelta(minutes=10)).ahead == 0


def test_a_kind_pattern_pause_and_the_pause_of_a_kind(models: Models, runner: OpenRunner,
                                                      engine: sa.Engine) -> None:
    held, free = build(engine, models, kind="mail.smtp"), build(engine, models, kind="mailer")
    with runner() as r:
        pauses_store.pause(models, r, PauseParams(kind="mail.*", actor="ops"))
        pauses_store.pause(models, r, PauseParams(kind="mail.smtp", actor="ops"))
        assert [j.id for j in claim_store.claim(models, r, claim_params(["mail.smtp", "mailer"]))] == [free.id]
        own = pauses_store.pause_of(models, r, "mail.smtp")
        pattern = pauses_store.pause_of(models, r, "mail.imap")
        assert own is not None and own.kind == "mail.smtp" and pattern is not None and pattern.kind == "mail.*"
        assert pauses_store.pause_of(models, r, "mailer") is None
    with runner() as r:
        pauses_store.resume(models, r, ResumeParams(kind="mail.smtp", actor="ops"))
        pauses_store.resume(models, r, ResumeParams(kind="mail.*", actor="ops"))
        assert [j.id for j in claim_store.claim(models, r, claim_params(["mail.smtp"]))] == [held.id]


def test_a_job_time_limit_is_stored_and_claimed_with_the_job(models: Models, runner: OpenRunner,
                                                             engine: sa.Engine) -> None:
    own, plain = build(engine, models, kind="t"), build(engine, models, kind="t")
    with runner() as r:
        timeouts_store.set_timeouts(models, r, TimeoutsParams(job_ids=[own.id], timeout=MINUTE))
        views = [history_store.fetch_job_view(models, r, JobParams(job_id=j.id)) for j in (own, plain)]
        assert [v.timeout if v is not None else "missing" for v in views] == [MINUTE, None]
    with runner() as r:
        claimed = {j.id: j.timeout for j in claim_store.claim(models, r, claim_params(["t"]))}
    assert claimed == {own.id: MINUTE, plain.id: None}
