"""The lease keeper on the memory backend: renewal, lost runs, delivered cancels, recovery, health."""

from __future__ import annotations

import threading
from datetime import timedelta

from support.memory_parts import WORKER, Parts

from venturi_sa import JobContext, Task
from venturi_sa.storage.params import RecoverParams
from venturi_sa.worker.lease_keeper import LeaseKeeper


class Noop(Task):
    KIND = "noop"

    def run(self, ctx: JobContext) -> None:
        return None


def keeper(parts: Parts, max_failures: int = 3) -> LeaseKeeper:
    return LeaseKeeper(parts.store, parts.transactions, WORKER, parts.inflight,
                       RecoverParams(max_failures={"noop": max_failures}), renew_every=1.0, recover_every=1.0,
                       stopping=threading.Event(), wake=parts.wake, healthy=parts.healthy)


def test_renewal_pushes_held_leases_and_marks_lost_runs() -> None:
    parts = Parts([Noop])
    kept_id, lost_id = parts.store.add("noop"), parts.store.add("noop")
    parts.producer.claim_round()
    kept, lost = parts.dispatched
    parts.clock.advance(seconds=50)
    parts.store.jobs[lost_id].claimed_by = "other:2"  # recovered and reclaimed elsewhere
    keeper(parts).renew()
    assert parts.store.jobs[kept_id].claim_expires_at == parts.clock.now + timedelta(seconds=60)
    assert not kept.ctx.lease_lost and lost.ctx.lease_lost


def test_renewal_delivers_a_stored_cancel_request_to_its_run() -> None:
    parts = Parts([Noop])
    job_id = parts.store.add("noop")
    parts.producer.claim_round()
    [run] = parts.dispatched
    parts.store.request_cancel(job_id, "ops", "stop")
    keeper(parts).renew()
    assert run.ctx.cancelled


def test_a_row_locked_run_is_neither_renewed_nor_lost() -> None:
    parts = Parts([Noop])
    job_id = parts.store.add("noop")
    parts.producer.claim_round()
    before = parts.store.jobs[job_id].claim_expires_at
    parts.clock.advance(seconds=10)
    with parts.store.locked(job_id):  # its outcome is being written
        keeper(parts).renew()
    assert parts.store.jobs[job_id].claim_expires_at == before and not parts.dispatched[0].ctx.lease_lost


def test_recovery_returns_expired_claims_and_ends_them_dead_at_the_backstop() -> None:
    parts = Parts([Noop])
    gone = parts.store.add("noop", status="claimed", claimed_by="dead:9", run_count=1,
                           claim_expires_at=parts.clock.now - timedelta(seconds=1))
    last = parts.store.add("noop", status="claimed", claimed_by="dead:9", run_count=3, failure_count=2,
                           claim_expires_at=parts.clock.now - timedelta(seconds=1))
    live = parts.store.add("noop", status="claimed", claimed_by="alive:1", run_count=1,
                           claim_expires_at=parts.clock.now + timedelta(seconds=30))
    assert keeper(parts).recover() == 2
    assert parts.store.jobs[gone].status == "pending" and parts.store.jobs[gone].visible_at == parts.clock.now
    assert parts.store.jobs[last].status == "dead" and [o.job_id for o in parts.store.owed] == [last]
    assert parts.store.jobs[live].status == "claimed"
    assert parts.store.journal_of(gone) == [(1, "stale-recovered")]
    assert parts.store.journal[-1].note == "lease of dead:9 expired; dead at max_failures"


def test_a_recovered_run_is_fenced_out_of_its_late_outcome() -> None:
    parts = Parts([Noop])
    job_id = parts.store.add("noop")
    parts.producer.claim_round()
    [run] = parts.dispatched
    parts.clock.advance(seconds=61)  # the lease ran out unrenewed
    assert keeper(parts).recover() == 1
    parts.pipeline.handle(run)
    assert parts.finished == [(run, False)]
    assert parts.store.journal_of(job_id) == [(1, "stale-recovered")]


def test_failing_renewals_stop_claims_until_the_store_is_back() -> None:
    parts = Parts([Noop])
    parts.store.add("noop")
    parts.producer.claim_round()
    lease_keeper = keeper(parts)
    parts.transactions.fail_next(1)
    lease_keeper._renew_round()
    assert not parts.healthy.is_set() and parts.producer.claim_round().claimed == 0
    parts.wake.clear()
    lease_keeper._renew_round()
    assert parts.healthy.is_set() and parts.wake.is_set()
