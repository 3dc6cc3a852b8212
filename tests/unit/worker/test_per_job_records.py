"""Per-job records: a lazily made cancel event still wakes; claimed rows and outcome rows keep their values."""

from __future__ import annotations

import json
import threading
from datetime import datetime, timedelta, timezone

from venturi_sa.states import Outcome
from venturi_sa.storage.outcomes import _batch_document
from venturi_sa.storage.params import ClaimedJob, Fence, FinishParams
from venturi_sa.worker.cancel_state import CancelState

WAIT = 30.0  # a lost wake-up fails the test after this long (it never passes by waiting)
AWARE = datetime(2030, 1, 1, tzinfo=timezone.utc)


def _waiter(state: CancelState, results: list[bool]) -> threading.Thread:
    thread = threading.Thread(target=lambda: results.append(state.wait(WAIT)))
    thread.start()
    return thread


def test_a_cancel_marked_before_anyone_waits_is_seen_by_a_later_wait() -> None:
    state = CancelState()
    assert state.mark("cancelled by ops")
    assert not state.mark("second")  # the first one decides
    results: list[bool] = []
    _waiter(state, results).join()
    assert results == [True] and state.note == "cancelled by ops"


def test_a_cancel_wakes_a_handler_waiting_on_the_event_it_made() -> None:
    state = CancelState()
    assert state.wait(0) is False  # makes the event: the mark below must set it
    results: list[bool] = []
    thread = _waiter(state, results)
    state.mark("cancelled", timed_out=True)
    thread.join()
    assert results == [True] and state.timed_out


def test_many_waiters_racing_one_mark_all_wake() -> None:
    state = CancelState()
    results: list[bool] = []
    threads = [_waiter(state, results) for _ in range(8)]
    state.mark("cancelled")
    for thread in threads:
        thread.join()
    assert results == [True] * 8


def _job(**overrides: object) -> ClaimedJob:
    values: dict[str, object] = {
        "id": "j1", "kind": "k", "payload": {"a": 1}, "carry": None, "priority": 0, "created_at": AWARE,
        "run_count": 2, "failure_count": 1, "claimed_by": "w"}
    values.update(overrides)
    return ClaimedJob(**values)  # type: ignore[arg-type]


def test_a_claimed_job_keys_its_runs_by_its_fence_and_compares_by_value() -> None:
    job = _job()
    assert job.fence == Fence(job_id="j1", kind="k", claimed_by="w", run_count=2)
    assert {job.fence: 1}[Fence(job_id="j1", kind="k", claimed_by="w", run_count=2)] == 1
    assert job == _job() and job != _job(run_count=3)
    assert (job.waited, job.timeout) == (0.0, None)
    assert "id='j1'" in repr(job)


def test_outcome_rows_carry_each_outcome_s_values_column_by_column() -> None:
    a, b = Fence(job_id="a", kind="k", claimed_by="w", run_count=1), Fence(job_id="b", kind="q", claimed_by="w",
                                                                            run_count=4)
    batch = [
        FinishParams(fence=a, outcome=Outcome.COMPLETED, attachment={"r": 1}, carry=None, save_carry=True),
        FinishParams(fence=b, outcome=Outcome.RETRIED, note="boom", failure=True, delay=timedelta(seconds=5),
                     visible_at=AWARE, carry={"n": 2}, save_carry=True),
        FinishParams(fence=a, outcome=Outcome.DEAD, note="x"),
    ]
    rows = json.loads(_batch_document(batch))
    assert rows == [
        ["a", "k", "w", 1, "completed", True, None, "0", 0, True, None, "completed", None, {"r": 1}, False],
        ["b", "q", "w", 4, "pending", False, AWARE.isoformat(), "0 days 5 seconds 0 microseconds", 1, True, {"n": 2},
         "retried", "boom", None, False],
        ["a", "k", "w", 1, "dead", True, None, "0", 0, False, None, "dead", "x", None, False],
    ]
