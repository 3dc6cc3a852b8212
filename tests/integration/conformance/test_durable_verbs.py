"""Conformance of the durable-step verbs (the DurableBackend seam), on every implementation.

read_steps, record_step, reach_sleep, reach_wait, wake_wait and read_parents,
with the signals a wait is resolved by.  Each test runs through the ``kit``
fixture: SQLAlchemy per sync driver, and the in-memory backend.  A run is a
job seeded ``claimed`` (by ``factory-host:1``, run 1); each verb runs in a
transaction of the implementation.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from support.backends import Kit

from venturi_sa.states import Outcome
from venturi_sa.storage.durable_params import (
    ParentsParams,
    RecordStepParams,
    SleepParams,
    StepsParams,
    WaitParams,
    WakeWaitParams,
)
from venturi_sa.storage.params import ClaimParams, Fence, FinishManyParams, FinishParams

WORKER = "factory-host:1"
HOUR = timedelta(hours=1)


def running(kit: Kit) -> Fence:
    [job_id] = kit.seed({"claimed": True, "claimed_by": WORKER})
    return Fence(job_id, "noop", WORKER, 1)


def steps(kit: Kit, job_id: str) -> dict[str, Any]:
    return kit.begin(lambda tx: kit.backend.read_steps(tx, StepsParams(job_id=job_id))).records


def pause(kit: Kit, fence: Fence, name: str, deadline: Any) -> None:
    """The suspended wait's outcome transaction: the fenced ``paused`` write, then the wake check."""
    def write(tx: Any) -> None:
        finished = FinishParams(fence=fence, outcome=Outcome.PAUSED, note="waiting", visible_at=deadline)
        assert fence in kit.backend.finish_many(tx, FinishManyParams(outcomes=[finished]))
        kit.backend.wake_wait(tx, WakeWaitParams(fence=fence, name=name, deadline=deadline))

    kit.begin(write)


def reclaim(kit: Kit) -> Fence:
    params = ClaimParams(worker_id="w:2", kinds=["noop"], limit=1, leases={}, default_lease=HOUR)
    [job] = kit.begin(lambda tx: kit.backend.claim(tx, params))
    return job.fence


# -- steps ---------------------------------------------------------------------------------

def test_a_step_is_recorded_once_and_read_back_by_name(kit: Kit) -> None:
    fence = running(kit)
    first = kit.begin(lambda tx: kit.backend.record_step(
        tx, RecordStepParams(fence=fence, name="charge", result={"id": "ch_1"}, elapsed=0.5)))
    assert first is not None and (first.entry, first.result, first.run_no) == ("step", {"id": "ch_1"}, 1)
    assert first.finished_at is not None and first.finished_at >= first.started_at
    again = kit.begin(lambda tx: kit.backend.record_step(
        tx, RecordStepParams(fence=fence, name="charge", result={"id": "ch_2"})))
    assert again == first  # a name is recorded once
    read = kit.begin(lambda tx: kit.backend.read_steps(tx, StepsParams(job_id=fence.job_id)))
    assert list(read.records) == ["charge"] and read.records["charge"] == first
    assert read.now >= first.started_at


def test_a_none_result_is_recorded_as_json_null(kit: Kit) -> None:
    fence = running(kit)
    kit.begin(lambda tx: kit.backend.record_step(tx, RecordStepParams(fence=fence, name="email", result=None)))
    assert steps(kit, fence.job_id)["email"].result is None


def test_a_run_that_lost_its_claim_records_nothing(kit: Kit) -> None:
    fence = running(kit)
    stale = fence._replace(run_count=2)
    assert kit.begin(lambda tx: kit.backend.record_step(tx, RecordStepParams(fence=stale, name="s", result=1))) is None
    assert kit.begin(lambda tx: kit.backend.reach_sleep(tx, SleepParams(fence=stale, name="z", delay=HOUR))) is None
    assert kit.begin(lambda tx: kit.backend.reach_wait(tx, WaitParams(fence=stale, name="w"))) is None
    assert steps(kit, fence.job_id) == {}


def test_a_rolled_back_record_leaves_nothing(kit: Kit) -> None:
    fence = running(kit)

    def record_then_fail(tx: Any) -> None:
        kit.backend.record_step(tx, RecordStepParams(fence=fence, name="ship", result="dhl"))
        raise RuntimeError("the transaction fails after the record")

    with pytest.raises(RuntimeError):
        kit.begin(record_then_fail)
    assert steps(kit, fence.job_id) == {}


# -- sleeps --------------------------------------------------------------------------------

def test_a_sleep_records_its_wake_time_once_and_resumes_after_it(kit: Kit) -> None:
    fence = running(kit)
    reached = kit.begin(lambda tx: kit.backend.reach_sleep(tx, SleepParams(fence=fence, name="nap", delay=HOUR)))
    assert reached is not None and reached.record.entry == "sleep" and reached.record.wake_at is not None
    assert reached.record.wake_at - reached.now == pytest.approx(HOUR, abs=timedelta(seconds=5))
    again = kit.begin(lambda tx: kit.backend.reach_sleep(
        tx, SleepParams(fence=fence, name="nap", delay=timedelta(days=9))))
    assert again is not None and again.record.wake_at == reached.record.wake_at  # recorded when first reached
    past = kit.begin(lambda tx: kit.backend.reach_sleep(
        tx, SleepParams(fence=fence, name="done", until=reached.now - HOUR)))
    assert past is not None and past.record.wake_at is not None and past.record.wake_at <= past.now


# -- waits and signals ---------------------------------------------------------------------

def test_a_wait_suspends_then_a_signal_wakes_it_and_resolves_it(kit: Kit) -> None:
    fence = running(kit)
    reached = kit.begin(lambda tx: kit.backend.reach_wait(tx, WaitParams(fence=fence, name="approved", timeout=HOUR)))
    assert reached is not None and reached.record.resolution is None and reached.record.wake_at is not None
    pause(kit, fence, "approved", reached.record.wake_at)
    assert kit.row(fence.job_id).visible_at == reached.record.wake_at  # held until the deadline
    assert kit.signal(fence.job_id, "approved", {"by": "bob"}) == "woke"
    assert kit.row(fence.job_id).visible_at <= kit.now()
    assert kit.signal(fence.job_id, "approved", {"by": "bob"}) == "duplicate"
    resumed = reclaim(kit)
    resolved = kit.begin(lambda tx: kit.backend.reach_wait(
        tx, WaitParams(fence=resumed, name="approved", timeout=HOUR)))
    assert resolved is not None
    assert (resolved.record.resolution, resolved.record.result) == ("signal", {"by": "bob"})
    assert resolved.record.run_no == 1 and resolved.record.wake_at == reached.record.wake_at


def test_a_signal_stored_while_the_job_runs_wakes_it_in_its_pause(kit: Kit) -> None:
    fence = running(kit)
    reached = kit.begin(lambda tx: kit.backend.reach_wait(tx, WaitParams(fence=fence, name="paid", timeout=HOUR)))
    assert reached is not None and reached.record.resolution is None
    assert kit.signal(fence.job_id, "paid", 42) == "stored"  # the job is claimed: nothing to wake yet
    pause(kit, fence, "paid", reached.record.wake_at)
    assert kit.row(fence.job_id).visible_at <= kit.now()  # the wake check saw the stored signal
    assert reclaim(kit).job_id == fence.job_id


def test_a_wait_at_its_deadline_times_out_and_refuses_a_late_signal(kit: Kit) -> None:
    fence = running(kit)
    reached = kit.begin(lambda tx: kit.backend.reach_wait(
        tx, WaitParams(fence=fence, name="approved", timeout=timedelta(0))))
    assert reached is not None and reached.record.resolution == "timeout" and reached.record.result is None
    assert kit.signal(fence.job_id, "approved", True) == "timed out"
    again = kit.begin(lambda tx: kit.backend.reach_wait(tx, WaitParams(fence=fence, name="approved", timeout=HOUR)))
    assert again is not None and again.record.resolution == "timeout"  # resolved once, for every later run


def test_a_signal_sent_before_the_wait_resolves_it_at_once(kit: Kit) -> None:
    fence = running(kit)
    assert kit.signal(fence.job_id, "go", "now") == "stored"
    reached = kit.begin(lambda tx: kit.backend.reach_wait(tx, WaitParams(fence=fence, name="go")))
    assert reached is not None and (reached.record.resolution, reached.record.result) == ("signal", "now")


def test_a_wait_without_a_deadline_is_never_claimable_until_its_signal(kit: Kit) -> None:
    fence = running(kit)
    reached = kit.begin(lambda tx: kit.backend.reach_wait(tx, WaitParams(fence=fence, name="forever")))
    assert reached is not None and reached.record.wake_at is None
    pause(kit, fence, "forever", None)
    params = ClaimParams(worker_id="w:2", kinds=["noop"], limit=1, leases={}, default_lease=HOUR)
    assert kit.begin(lambda tx: kit.backend.claim(tx, params)) == []
    assert kit.signal(fence.job_id, "forever") == "woke"
    assert reclaim(kit).job_id == fence.job_id


# -- parents -------------------------------------------------------------------------------

def test_parents_are_read_in_after_order_with_their_results(kit: Kit) -> None:
    waiting, done = kit.seed({}, {"kind": "parent"})
    params = ClaimParams(worker_id="w:1", kinds=["parent"], limit=1, leases={}, default_lease=HOUR)
    [job] = kit.begin(lambda tx: kit.backend.claim(tx, params))
    finished = FinishParams(fence=job.fence, outcome=Outcome.COMPLETED, note="ok", attachment={"total": 3})
    kit.begin(lambda tx: kit.backend.finish_many(tx, FinishManyParams(outcomes=[finished])))
    [child] = kit.seed({"kind": "child"})
    kit.link(child, [done, waiting])
    got = kit.begin(lambda tx: kit.backend.read_parents(tx, ParentsParams(job_id=child)))
    assert [(p.id, p.kind, p.status, p.result, p.note) for p in got] == [
        (done, "parent", "completed", {"total": 3}, "ok"), (waiting, "noop", "pending", None, None)]
    page = kit.begin(lambda tx: kit.backend.read_parents(tx, ParentsParams(job_id=child, offset=1, limit=5)))
    assert [p.id for p in page] == [waiting]
    assert kit.begin(lambda tx: kit.backend.read_parents(tx, ParentsParams(job_id=waiting))) == []
