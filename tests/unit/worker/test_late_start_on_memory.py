"""A claimed run whose lease may have run out before its handler started is dropped, not started.

The worker judges the lease with its own monotonic clock, from the moment the
claim (or the latest renewal) was sent, less a margin; the lease keeper's
renewals push that deadline.  A dropped run frees its slot once, writes
nothing (the lease's recovery records ``stale-recovered``), logs one warning
and is reported given up.
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import timedelta

import pytest
from support.memory_parts import WORKER, Parts

from venturi_sa import JobContext, Task
from venturi_sa.storage.params import RecoverParams
from venturi_sa.worker.inflight import Start, latest_start
from venturi_sa.worker.lease_keeper import LeaseKeeper

CALLS: list[str] = []


class Noop(Task):
    KIND = "late_noop"

    def run(self, ctx: JobContext) -> None:
        CALLS.append(ctx.job_id)


@pytest.fixture(autouse=True)
def _no_calls() -> None:
    CALLS.clear()


def keeper(parts: Parts) -> LeaseKeeper:
    return LeaseKeeper(parts.store, parts.transactions, WORKER, parts.inflight,
                       RecoverParams(max_failures={Noop.KIND: 3}), renew_every=1.0, recover_every=1.0,
                       stopping=threading.Event(), wake=parts.wake, healthy=parts.healthy)


def test_the_start_deadline_is_the_lease_from_the_claim_less_a_margin() -> None:
    assert latest_start(100.0, timedelta(seconds=60)) == 159.0  # at most a second of margin
    assert latest_start(100.0, timedelta(seconds=2)) == pytest.approx(101.8)  # a tenth of a short lease
    parts = Parts([Noop])
    parts.store.add(Noop.KIND), parts.store.add(Noop.KIND)
    before = time.monotonic()
    parts.producer.claim_round()
    after = time.monotonic()
    in_time, late = parts.dispatched
    assert before + 59.0 <= in_time.start_deadline <= after + 59.0  # the default lease, from the claim's sending
    assert parts.inflight.start(in_time, before + 58.9) is Start.RUN
    assert parts.inflight.start(late, after + 59.1) is Start.LOST


def test_a_run_paused_past_its_lease_is_dropped_without_a_write(caplog: pytest.LogCaptureFixture) -> None:
    parts = Parts([Noop])
    job_id = parts.store.add(Noop.KIND)
    parts.producer.claim_round()
    [run] = parts.dispatched
    run.start_deadline = time.monotonic() - 2.0  # as if the process had been stopped between claim and start
    with caplog.at_level(logging.WARNING):
        parts.pipeline.handle(run)
    assert CALLS == []
    assert parts.finished == [(run, False)] and parts.freed == [(4, Noop.KIND)]
    assert parts.inflight.free() == 4 and len(parts.inflight) == 0
    [(lost, overdue)] = parts.lost
    assert lost is run and overdue >= 2.0
    [warning] = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert f"job {job_id} run 1 not started" in warning.getMessage()
    assert "dropped as lost" in warning.getMessage()
    job = parts.store.jobs[job_id]
    assert (job.status, job.claimed_by) == ("claimed", WORKER) and parts.store.journal_of(job_id) == []
    parts.clock.advance(seconds=61)
    assert keeper(parts).recover() == 1  # the recovery records the run, and the job runs again
    assert parts.store.journal_of(job_id) == [(1, "stale-recovered")]
    parts.claim_and_run()
    assert CALLS == [job_id] and parts.store.journal_of(job_id) == [(1, "stale-recovered"), (2, "completed")]


def test_a_renewed_lease_lets_a_queued_run_start_later() -> None:
    parts = Parts([Noop])
    job_id = parts.store.add(Noop.KIND)
    parts.producer.claim_round()
    [run] = parts.dispatched
    run.start_deadline = time.monotonic() - 2.0  # the claim's own lease would have run out...
    before = time.monotonic()
    keeper(parts).renew()  # ... but the lease keeper renewed it meanwhile: the latest lease counts
    assert run.start_deadline >= before + 59.0
    parts.pipeline.handle(run)
    assert CALLS == [job_id] and parts.store.journal_of(job_id) == [(1, "completed")]
    assert parts.lost == []


def test_a_run_whose_claim_the_lease_keeper_found_gone_is_not_started() -> None:
    parts = Parts([Noop])
    job_id = parts.store.add(Noop.KIND)
    parts.producer.claim_round()
    [run] = parts.dispatched
    parts.store.jobs[job_id].claimed_by = "other:2"  # recovered and reclaimed elsewhere
    keeper(parts).renew()
    assert run.ctx.lease_lost and run.start_deadline > time.monotonic()
    parts.pipeline.handle(run)
    assert CALLS == [] and parts.finished == [(run, False)] and [r for r, _ in parts.lost] == [run]
    assert parts.freed == [(4, Noop.KIND)] and parts.store.journal_of(job_id) == []


def test_a_run_released_at_shutdown_is_not_reported_lost() -> None:
    parts = Parts([Noop])
    parts.store.add(Noop.KIND)
    parts.producer.claim_round()
    [run] = parts.dispatched
    run.start_deadline = time.monotonic() - 2.0
    assert parts.inflight.release_unfinished() == [run]
    parts.pipeline.handle(run)
    assert CALLS == [] and parts.lost == [] and parts.finished == [] and parts.freed == [(4, Noop.KIND)]
