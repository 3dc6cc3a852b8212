"""Conformance of the worker's verbs (the Backend seam), on every implementation.

claim, finish_many, renew, recover, soonest_visible, checkpoint and ping,
with the pauses, cancel requests and owed ``on_dead`` calls they read and
write.  Each test runs through the ``kit`` fixture: SQLAlchemy per sync
driver, and the in-memory backend.  Rows are put in and committed; each verb
runs in a transaction of the implementation.  Concurrency is another
transaction's row lock (``kit.locked``), never sleeps.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from support.backends import Kit

from venturi_sa.states import Outcome
from venturi_sa.storage.params import (
    PING,
    CheckpointParams,
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


def claim(kit: Kit, kinds: list[str], limit: int, worker: str = "w:1",
          caps: dict[str, int] | None = None) -> list[ClaimedJob]:
    params = ClaimParams(worker_id=worker, kinds=kinds, limit=limit, leases={}, default_lease=LEASE, caps=caps or {})
    return kit.begin(lambda tx: kit.backend.claim(tx, params))


def finish(kit: Kit, *outcomes: FinishParams) -> dict[Fence, Outcome]:
    return kit.begin(lambda tx: kit.backend.finish_many(tx, FinishManyParams(outcomes=outcomes)))


# -- claim ---------------------------------------------------------------------------------

def test_claim_takes_eligible_jobs_in_priority_then_age_order(kit: Kit) -> None:
    low, high, later, other = kit.seed({"priority": 2}, {"priority": 0}, {"scheduled": True}, {"kind": "other"})
    got = claim(kit, ["noop"], 10)
    assert [j.id for j in got] == [high, low]
    assert all(j.run_count == 1 and j.claimed_by == "w:1" for j in got)
    assert kit.row(later).status == "pending" and kit.row(other).status == "pending"
    assert kit.row(high).claim_expires_at is not None and kit.row(high).claimed_by == "w:1"


def test_claim_orders_equal_priorities_by_age_then_id(kit: Kit) -> None:
    ids = kit.seed(*({} for _ in range(4)))
    assert [j.id for j in claim(kit, ["noop"], 10)] == sorted(ids)


def test_claim_never_takes_more_than_the_limit_and_skips_locked_rows(kit: Kit) -> None:
    ids = kit.seed(*({} for _ in range(5)))
    with kit.locked(ids[0]):
        got = claim(kit, ["noop"], 3)
    assert len(got) == 3 and ids[0] not in {j.id for j in got}


def test_a_capped_kind_is_claimed_by_priority_beside_an_uncapped_backlog(kit: Kit) -> None:
    backlog = kit.seed(*({"kind": "bulk", "priority": 2} for _ in range(20)))
    urgent = kit.seed(*({"kind": "capped", "priority": 0} for _ in range(5)))
    got = claim(kit, ["bulk", "capped"], 10, caps={"capped": 3})
    kinds = [j.kind for j in got]
    assert kinds[:3] == ["capped"] * 3 and kinds.count("capped") == 3  # first by priority, held to the cap
    assert len(got) == 10 and {j.id for j in got if j.kind == "bulk"} <= set(backlog)
    assert {j.id for j in got if j.kind == "capped"} <= set(urgent)


def test_a_capped_kind_with_no_room_is_not_claimed(kit: Kit) -> None:
    kit.seed({"kind": "capped", "priority": 0}, {"kind": "bulk"})
    assert [j.kind for j in claim(kit, ["bulk", "capped"], 5, caps={"capped": 0})] == ["bulk"]


def test_a_paused_kind_or_pattern_is_not_claimed(kit: Kit) -> None:
    kit.seed({"kind": "mail.smtp"}, {"kind": "reports"})
    [free] = kit.seed({"kind": "mailer"})
    kit.pause("mail.*")
    kit.pause("reports")
    assert [j.id for j in claim(kit, ["mail.smtp", "reports", "mailer"], 10)] == [free]


def test_claim_returns_plain_records(kit: Kit) -> None:
    [job_id] = kit.seed({"payload": {"to": "a@b", "n": 1}, "priority": 2})
    [job] = claim(kit, ["noop"], 1)
    assert (job.id, job.kind, job.payload, job.priority, job.failure_count) == (job_id, "noop",
                                                                                 {"to": "a@b", "n": 1}, 2, 0)
    assert job.fence == Fence(job_id, "noop", "w:1", 1) and job.waited >= 0.0 and job.timeout is None


# -- finish_many ------------------------------------------------------------------------------

def test_finish_many_writes_fenced_outcomes_and_skips_broken_fences(kit: Kit) -> None:
    kit.seed({}, {})
    a, b = claim(kit, ["noop"], 2)
    stale = Fence(job_id=b.id, kind=b.kind, claimed_by="someone-else", run_count=b.run_count)
    written = finish(kit, FinishParams(fence=a.fence, outcome=Outcome.COMPLETED, note="done"),
                     FinishParams(fence=stale, outcome=Outcome.COMPLETED))
    assert written == {a.fence: Outcome.COMPLETED}
    assert kit.row(a.id).status == "completed" and kit.row(b.id).status == "claimed"
    assert kit.row(a.id).finished_at is not None and kit.row(a.id).claimed_by is None
    assert kit.journal(a.id) == [(1, "completed")] and kit.journal(b.id) == []


def test_finish_many_with_two_runs_of_one_job_journals_only_the_current_run(kit: Kit) -> None:
    kit.seed({})
    [job] = claim(kit, ["noop"], 1)
    old = Fence(job_id=job.id, kind=job.kind, claimed_by=job.claimed_by, run_count=job.run_count - 1)
    written = finish(kit, FinishParams(fence=old, outcome=Outcome.COMPLETED),
                     FinishParams(fence=job.fence, outcome=Outcome.RETRIED, failure=True,
                                  delay=timedelta(seconds=30)))
    assert written == {job.fence: Outcome.RETRIED}
    assert kit.journal(job.id) == [(1, "retried")]
    r = kit.row(job.id)
    assert (r.status, r.failure_count, r.claimed_by) == ("pending", 1, None)
    assert r.visible_at > kit.now() + timedelta(seconds=20)


def test_a_finished_run_is_fenced_out_of_a_second_write(kit: Kit) -> None:
    kit.seed({})
    [job] = claim(kit, ["noop"], 1)
    assert finish(kit, FinishParams(fence=job.fence, outcome=Outcome.COMPLETED)) == {job.fence: Outcome.COMPLETED}
    assert finish(kit, FinishParams(fence=job.fence, outcome=Outcome.DEAD)) == {}
    assert kit.row(job.id).status == "completed" and kit.journal(job.id) == [(1, "completed")]


def test_finish_saves_the_carry_and_owes_on_dead_when_asked(kit: Kit) -> None:
    kit.seed({}, {})
    a, b = claim(kit, ["noop"], 2)
    finish(kit, FinishParams(fence=a.fence, outcome=Outcome.PAUSED, carry={"step": [1, 2]}, save_carry=True),
           FinishParams(fence=b.fence, outcome=Outcome.DEAD, note="gave up", owe_on_dead=True))
    assert kit.row(a.id).carry == {"step": [1, 2]} and kit.row(a.id).status == "pending"
    assert kit.row(b.id).status == "dead" and kit.owed(b.id) == 1 and kit.owed(a.id) == 0


@pytest.mark.parametrize("asked", [
    {"outcome": Outcome.RETRIED, "failure": True},
    {"outcome": Outcome.PAUSED, "delay": timedelta(minutes=5)},
    {"outcome": Outcome.RELEASED},
], ids=["retried", "paused", "released"])
def test_a_stored_undelivered_cancel_turns_a_send_back_into_dead_and_finish_many_says_dead(
        kit: Kit, asked: dict[str, Any]) -> None:
    kit.seed({}, {})
    job, other = claim(kit, ["noop"], 2)
    kit.request_cancel(job.id, "ops", "stop")
    written = finish(kit, FinishParams(fence=job.fence, **asked),
                     FinishParams(fence=other.fence, **asked))  # no request: its own outcome stands
    assert written == {job.fence: Outcome.DEAD, other.fence: asked["outcome"]}
    assert kit.row(job.id).status == "dead" and kit.journal(job.id) == [(1, "dead")]
    assert kit.notes(job.id) == ["cancelled by ops (before the cancel reached its run, the run ended): stop"]
    assert kit.owed(job.id) == 1 and kit.owed(other.id) == 0
    assert kit.row(other.id).status == "pending" and kit.journal(other.id) == [(1, asked["outcome"].value)]


def test_a_terminal_outcome_stands_over_a_stored_cancel(kit: Kit) -> None:
    kit.seed({})
    [job] = claim(kit, ["noop"], 1)
    kit.request_cancel(job.id, "ops", "stop")
    assert finish(kit, FinishParams(fence=job.fence, outcome=Outcome.COMPLETED)) == {job.fence: Outcome.COMPLETED}
    assert kit.row(job.id).status == "completed" and kit.journal(job.id) == [(1, "completed")]
    assert kit.owed(job.id) == 0


@pytest.mark.parametrize("bad", [
    {"note": {"n": 1}}, {"note": "nul\x00"}, {"note": "x" * 5000}, {"delay": 5},
    {"visible_at": __import__("datetime").datetime(2030, 1, 1)}, {"attachment": {"k": "nul\x00"}},
    {"attachment": {1, 2}}, {"save_carry": True, "carry": float("nan")},
], ids=["dict-note", "nul-note", "long-note", "int-delay", "naive-time", "nul-json", "set", "nan-carry"])
def test_outcome_params_refuse_values_a_batch_cannot_store(bad: dict[str, Any]) -> None:
    fence = Fence(job_id="j", kind="k", claimed_by="w", run_count=1)
    with pytest.raises(InvalidOutcome):
        FinishParams(fence=fence, outcome=Outcome.PAUSED, **bad)


def test_a_transaction_that_raises_keeps_nothing(kit: Kit) -> None:
    kit.seed({})
    [job] = claim(kit, ["noop"], 1)

    def write_then_fail(tx: Any) -> None:
        kit.backend.finish_many(tx, FinishManyParams(outcomes=[FinishParams(fence=job.fence,
                                                                            outcome=Outcome.COMPLETED)]))
        raise RuntimeError("rolled back")

    with pytest.raises(RuntimeError):
        kit.begin(write_then_fail)
    assert kit.row(job.id).status == "claimed" and kit.journal(job.id) == []


# -- renew ------------------------------------------------------------------------------------

def test_renew_extends_held_leases_and_reports_lost_ones(kit: Kit) -> None:
    kit.seed({}, {})
    kept, gone = claim(kit, ["noop"], 2)
    kit.release(gone.id)  # an operator release: the claim of `gone` is over
    before = kit.row(kept.id).claim_expires_at
    result = kit.begin(lambda tx: kit.backend.renew(tx, RenewParams(worker_id="w:1", runs=[kept.fence, gone.fence],
                                                                    lease=timedelta(minutes=10))))
    assert result.renewed == {kept.fence} and result.lost == {gone.fence}
    assert kit.row(kept.id).claim_expires_at > before + timedelta(minutes=5)


def test_renew_skips_a_locked_row_without_waiting_or_calling_it_lost(kit: Kit) -> None:
    kit.seed({})
    [job] = claim(kit, ["noop"], 1)
    with kit.locked(job.id):  # would fail (lock_timeout) if renewal waited
        result = kit.begin(lambda tx: kit.backend.renew(tx, RenewParams(worker_id="w:1", runs=[job.fence],
                                                                        lease=LEASE)), no_wait=True)
    assert not result.renewed and not result.lost


def test_renew_reports_cancel_requests_of_held_runs(kit: Kit) -> None:
    kit.seed({})
    [job] = claim(kit, ["noop"], 1)
    params = RenewParams(worker_id="w:1", runs=[job.fence], lease=LEASE)
    assert dict(kit.begin(lambda tx: kit.backend.renew(tx, params)).cancels) == {}
    kit.request_cancel(job.id, "ops", "stop")
    result = kit.begin(lambda tx: kit.backend.renew(tx, params))
    assert dict(result.cancels) == {job.fence: "cancelled by ops while running: stop"}
    assert result.renewed == {job.fence}


# -- recover ----------------------------------------------------------------------------------

def test_recover_uses_each_kinds_own_backstop_and_only_known_kinds(kit: Kit) -> None:
    strict, patient, unknown = kit.seed({"expired": True, "kind": "strict"},
                                        {"expired": True, "kind": "patient", "failure_count": 4},
                                        {"expired": True, "kind": "unknown"})
    recovered = kit.begin(lambda tx: kit.backend.recover(tx, RecoverParams(max_failures={"strict": 1,
                                                                                         "patient": 25})))
    assert {r.id: r.dead for r in recovered} == {strict: True, patient: False}
    assert {r.outcome for r in recovered} == {Outcome.STALE_RECOVERED}
    assert kit.row(strict).status == "dead" and kit.row(patient).status == "pending"
    assert kit.row(patient).failure_count == 5 and kit.row(patient).claimed_by is None
    assert kit.row(unknown).status == "claimed"
    assert kit.journal(patient) == [(1, "stale-recovered")] and kit.journal(strict) == [(1, "stale-recovered")]
    assert kit.owed(strict) == 1 and kit.owed(patient) == 0


def test_recover_leaves_live_leases_and_locked_rows_alone(kit: Kit) -> None:
    [live, held] = kit.seed({"claimed": True}, {"expired": True})
    with kit.locked(held):
        assert kit.begin(lambda tx: kit.backend.recover(tx, RecoverParams(max_failures={"noop": 5}))) == []
    assert kit.row(live).status == "claimed" and kit.row(held).status == "claimed"


def test_recover_ends_a_job_with_a_cancel_request_dead(kit: Kit) -> None:
    [job_id] = kit.seed({"expired": True})
    kit.request_cancel(job_id, "ops")
    [recovered] = kit.begin(lambda tx: kit.backend.recover(tx, RecoverParams(max_failures={"noop": 5})))
    assert recovered.dead and kit.row(job_id).status == "dead" and kit.journal(job_id) == [(1, "dead")]
    assert recovered.outcome is Outcome.DEAD  # what it recorded, as the journal says
    assert (kit.notes(job_id)[0] or "").startswith("cancelled by ops (before the cancel was delivered, the lease")
    assert kit.owed(job_id) == 1


# -- checkpoint, soonest_visible and ping -------------------------------------------------------

def test_checkpoint_is_fenced(kit: Kit) -> None:
    kit.seed({})
    [job] = claim(kit, ["noop"], 1)
    assert kit.begin(lambda tx: kit.backend.checkpoint(tx, CheckpointParams(fence=job.fence, carry={"at": 3})))
    stale = job.fence._replace(run_count=job.run_count + 1)
    assert not kit.begin(lambda tx: kit.backend.checkpoint(tx, CheckpointParams(fence=stale, carry={"at": 9})))
    assert kit.row(job.id).carry == {"at": 3} and kit.row(job.id).status == "claimed" and kit.journal(job.id) == []


def test_soonest_visible_is_the_next_future_visible_at_of_the_kinds(kit: Kit) -> None:
    kit.seed({"visible_in": timedelta(seconds=30)}, {"visible_in": timedelta(seconds=5), "kind": "other"})
    soonest = kit.begin(lambda tx: kit.backend.soonest_visible(tx, SoonestParams(kinds=["noop"])))
    assert soonest is not None and 20 < soonest <= 30
    assert kit.begin(lambda tx: kit.backend.soonest_visible(tx, SoonestParams(kinds=["absent"]))) is None
    kit.begin(lambda tx: kit.backend.ping(tx, PING))
