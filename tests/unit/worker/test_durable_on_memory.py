"""ctx.step, ctx.sleep, ctx.wait_for and ctx.parents on the memory backend: recorded and replayed as on PostgreSQL."""

from __future__ import annotations

from typing import Any

import pytest
from support.memory_parts import Parts

from venturi_sa import JobContext, Outcome, Suspended, Task
from venturi_sa.errors import InvalidOption, LeaseLost
from venturi_sa.storage.params import FinishManyParams, FinishParams
from venturi_sa.worker.durable import wake_check

calls: list[str] = []


class Sleeper(Task):
    KIND = "sleeper"

    def run(self, ctx: JobContext) -> Any:
        first = ctx.step("first", lambda: calls.append("first") or len(calls))
        ctx.sleep(60)
        ctx.step("second", lambda: calls.append("second"))
        return first


def test_steps_replay_and_a_sleep_suspends_until_its_wake_time() -> None:
    calls.clear()
    parts = Parts([Sleeper])
    job_id = parts.store.add("sleeper")
    [run] = parts.claim_and_run()
    assert run.params is not None and run.params.outcome is Outcome.PAUSED
    job, records = parts.store.jobs[job_id], parts.store.steps[job_id]
    assert (job.status, job.visible_at) == ("pending", records["sleep#1"].wake_at)
    assert list(records) == ["first", "sleep#1"] and calls == ["first"]
    parts.clock.advance(seconds=30)
    assert parts.claim_and_run() == []  # still asleep
    parts.clock.advance(seconds=31)
    [resumed] = parts.claim_and_run()
    assert resumed.params is not None and resumed.params.outcome is Outcome.COMPLETED
    assert calls == ["first", "second"]  # the first step replayed, not called again
    assert resumed.params.attachment == 1 and parts.store.journal_of(job_id) == [(1, "paused"), (2, "completed")]


class Waiter(Task):
    KIND = "waiter"
    signal_while_running: Any = None

    def run(self, ctx: JobContext) -> Any:
        try:
            return ctx.wait_for("approved", timeout=3600)
        except Suspended:
            if Waiter.signal_while_running is not None:
                Waiter.signal_while_running(ctx.job_id)  # after the wait was reached, before its outcome
            raise


def test_a_wait_through_the_completer_is_woken_by_a_signal_stored_before_its_outcome() -> None:
    """The wake stage runs in the store's own outcome transaction: no ORM session needed on memory."""
    parts = Parts([Waiter])
    Waiter.signal_while_running = lambda job_id: parts.store.signal(job_id, "approved", {"ok": True})
    try:
        job_id = parts.store.add("waiter")
        [run] = parts.claim_and_run()
    finally:
        Waiter.signal_while_running = None
    assert run.params is not None and run.params.outcome is Outcome.PAUSED
    assert parts.store.jobs[job_id].visible_at <= parts.clock()  # woken at once, not held to the deadline
    [resumed] = parts.claim_and_run()
    assert resumed.params is not None and resumed.params.outcome is Outcome.COMPLETED
    assert resumed.params.attachment == {"ok": True}


def test_a_wait_through_the_completer_is_held_to_its_deadline_without_a_signal() -> None:
    parts = Parts([Waiter])
    job_id = parts.store.add("waiter")
    [run] = parts.claim_and_run()
    assert run.params is not None and run.params.outcome is Outcome.PAUSED
    assert parts.store.jobs[job_id].visible_at > parts.clock()
    assert parts.claim_and_run() == []
    assert parts.store.signal(job_id, "approved", {"ok": False}).value == "woke"
    [resumed] = parts.claim_and_run()
    assert resumed.params is not None and resumed.params.attachment == {"ok": False}


def _context(parts: Parts, kind: str = "sleeper") -> JobContext:
    parts.store.add(kind)
    parts.producer.claim_round()
    return parts.dispatched[-1].ctx


def _fence(parts: Parts) -> Any:
    return parts.dispatched[-1].fence


def test_a_wait_is_woken_by_a_signal_and_returns_its_payload_on_the_next_run() -> None:
    parts = Parts([Sleeper])
    ctx = _context(parts)
    with pytest.raises(Suspended):
        ctx.wait_for("approved", timeout=3600)
    params = FinishParams(fence=_fence(parts), outcome=Outcome.PAUSED, note="waiting",
                          visible_at=ctx.suspension.until if ctx.suspension else None)
    call = wake_check(ctx, params)
    assert call is not None

    def outcome(tx: Any) -> None:
        parts.store.finish_many(tx, FinishManyParams(outcomes=[params]))
        call(tx)

    parts.store.begin(outcome)
    assert parts.store.jobs[ctx.job_id].visible_at > parts.clock()  # held to its deadline
    assert parts.store.signal(ctx.job_id, "approved", {"ok": True}).value == "woke"
    parts.producer.claim_round()
    again = parts.dispatched[-1].ctx
    assert again.job_id == ctx.job_id and again.wait_for("approved", timeout=3600) == {"ok": True}


def test_a_transactional_step_is_refused_before_fn_runs() -> None:
    parts = Parts([Sleeper])
    ctx = _context(parts)
    ran: list[object] = []
    with pytest.raises(InvalidOption, match="MemoryBackend"):
        ctx.step("ship", ran.append, transactional=True)
    assert ran == [] and parts.store.steps.get(ctx.job_id, {}) == {}


def test_a_zombie_run_records_nothing() -> None:
    parts = Parts([Sleeper])
    ctx = _context(parts)
    parts.store.jobs[ctx.job_id].claimed_by = "someone-else"
    with pytest.raises(LeaseLost):
        ctx.step("charge", lambda: 1)
    assert parts.store.steps.get(ctx.job_id, {}) == {} and ctx.lease_lost


def test_ctx_parents_reads_the_store() -> None:
    parts = Parts([Sleeper])
    parent = parts.store.add("sleeper", status="completed")
    ctx = _context(parts)
    parts.store.link(ctx.job_id, [parent])
    assert [(p.id, p.status) for p in ctx.parents] == [(parent, "completed")]
