"""The memory backend's own contract: what tests put in and read back, and its transactions.

Its verbs' semantics are held to the SQL backend's by tests/conformance/test_worker_verbs.py.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from venturi_sa.states import Outcome
from venturi_sa.storage.backend import Backend, Transactions
from venturi_sa.storage.memory import MemoryBackend, MemoryTx
from venturi_sa.storage.params import ClaimParams, FinishManyParams, FinishParams

LEASE = timedelta(seconds=60)


def claim_all(store: MemoryBackend, tx: MemoryTx) -> list[str]:
    params = ClaimParams(worker_id="w", kinds=["noop"], limit=10, leases={}, default_lease=LEASE)
    return [j.id for j in store.claim(tx, params)]


def test_it_is_a_backend_and_its_own_transactions() -> None:
    store = MemoryBackend(prefix="q")
    backend: Backend = store
    transactions: Transactions = store
    assert backend.prefix == "q" and transactions.begin(lambda tx: isinstance(tx, MemoryTx))


def test_added_jobs_are_read_back_as_stored_json() -> None:
    store = MemoryBackend()
    job_id = store.add("noop", {"ids": (1, 2), 3: "x"}, priority=0)
    job = store.jobs[job_id]
    assert (job.kind, job.payload, job.priority, job.status) == ("noop", {"ids": [1, 2], "3": "x"}, 0, "pending")
    assert store.journal == [] and store.owed == []


def test_a_transaction_that_raises_is_rolled_back_whole() -> None:
    store = MemoryBackend()
    job_id = store.add("noop")

    def claim_and_finish_then_fail(tx: MemoryTx) -> None:
        [job] = store.claim(tx, ClaimParams(worker_id="w", kinds=["noop"], limit=1, leases={}, default_lease=LEASE))
        store.finish_many(tx, FinishManyParams(outcomes=[FinishParams(fence=job.fence, outcome=Outcome.DEAD,
                                                                      owe_on_dead=True)]))
        raise RuntimeError("the connection dropped before COMMIT")

    with pytest.raises(RuntimeError):
        store.begin(claim_and_finish_then_fail)
    job = store.jobs[job_id]
    assert (job.status, job.run_count, job.claimed_by) == ("pending", 0, None)
    assert store.journal == [] and store.owed == []
    assert store.begin(lambda tx: claim_all(store, tx)) == [job_id]  # and it is claimable as before


def test_a_rolled_back_cancel_request_removal_is_restored() -> None:
    store = MemoryBackend()
    job_id = store.add("noop")
    [job] = store.begin(lambda tx: store.claim(tx, ClaimParams(worker_id="w", kinds=["noop"], limit=1, leases={},
                                                                default_lease=LEASE)))
    store.request_cancel(job_id, "ops")

    def finish_then_fail(tx: MemoryTx) -> None:
        store.finish_many(tx, FinishManyParams(outcomes=[FinishParams(fence=job.fence, outcome=Outcome.COMPLETED)]))
        assert store.cancels == {}
        raise RuntimeError("rolled back")

    with pytest.raises(RuntimeError):
        store.begin(finish_then_fail)
    assert job_id in store.cancels and store.jobs[job_id].status == "claimed"


def test_a_pause_pattern_holds_the_kinds_it_prefixes_until_it_ends() -> None:
    store = MemoryBackend()
    store.add("mail.smtp")
    now = store.clock()
    store.pause("mail.*", resume_at=now + timedelta(hours=1))
    params = ClaimParams(worker_id="w", kinds=["mail.smtp"], limit=5, leases={}, default_lease=LEASE)
    assert store.begin(lambda tx: store.claim(tx, params)) == []
    store.clock = lambda: now + timedelta(hours=2)
    assert len(store.begin(lambda tx: store.claim(tx, params))) == 1
