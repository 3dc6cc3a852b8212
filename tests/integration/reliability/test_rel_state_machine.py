"""A stateful property test of the storage verbs against the real database.

Hypothesis drives enqueue (with dedup), claims by several workers, renewals,
outcomes with fresh or stale fences, lease expiry, recovery and cleanup, and
after every step checks the queue's invariants on the actual rows.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    invariant,
    multiple,
    rule,
    run_state_machine_as_test,
)
from marshmallow import Schema, fields
from sqlalchemy.orm import Session

from venturi_sa import Queue, Task, make_models
from venturi_sa.states import TERMINAL, Outcome
from venturi_sa.storage import claim as claims
from venturi_sa.storage import leases, recovery
from venturi_sa.storage.cleanup import CleanupParams, delete_batch_statement
from venturi_sa.storage.outcomes import finish
from venturi_sa.storage.params import ClaimParams, Fence, FinishParams, RecoverParams, RenewParams

MAX_FAILURES = 3
WORKERS = ("w1", "w2", "w3")
COLUMNS = "id, status, claimed_by, run_count, failure_count, finished_at, claim_expires_at, carry, payload"


class KeyPayload(Schema):
    key = fields.String(allow_none=True, load_default=None)
    n = fields.Integer(load_default=0)


class Keyed(Task):
    KIND = "sm"
    Payload = KeyPayload
    max_failures = MAX_FAILURES

    def dedup_key(self) -> str | None:
        key: str | None = self.payload["key"]
        return key


class QueueMachine(RuleBasedStateMachine):
    """The model: how many rows were enqueued and removed, journal rows expected, terminal snapshots."""

    engine: sa.Engine
    queue: Queue
    fences = Bundle("fences")

    def __init__(self) -> None:
        super().__init__()
        self.models = self.queue.models
        with self.engine.begin() as conn:
            conn.execute(sa.text(f"DELETE FROM {self.models.prefix}_jobs"))
        self.enqueued = 0
        self.removed = 0
        self.journal_rows = 0
        self.terminal: dict[str, Any] = {}
        self.seen: set[str] = set()

    # -- helpers -----------------------------------------------------------------------------
    def _rows(self) -> dict[str, Any]:
        with self.engine.connect() as conn:
            rows = conn.execute(sa.text(f"SELECT {COLUMNS} FROM {self.models.prefix}_jobs")).all()
        return {r.id: r for r in rows}

    def _row(self, job_id: str) -> Any:
        return self._rows().get(job_id)

    # -- rules -------------------------------------------------------------------------------
    @rule(keys=st.lists(st.sampled_from([None, "a", "b"]), min_size=1, max_size=3))
    def enqueue(self, keys: list[str | None]) -> None:
        with Session(self.engine) as s, s.begin():
            jobs = self.queue.enqueue_many(s, [Keyed(key=k, n=i) for i, k in enumerate(keys)])
            ids = [j.id for j in jobs]
        for job_id in ids:
            if job_id in self.seen:  # merged into a pending job, maybe one of this very call
                self.journal_rows += 1
            else:
                self.seen.add(job_id)
                self.enqueued += 1

    @rule(target=fences, worker=st.sampled_from(WORKERS), limit=st.integers(1, 3),
          lease_ms=st.sampled_from([1, 60_000]))
    def claim(self, worker: str, limit: int, lease_ms: int) -> Any:
        lease = timedelta(milliseconds=lease_ms)
        with Session(self.engine) as s, s.begin():
            got = claims.claim(self.models, s, ClaimParams(worker_id=worker, kinds=["sm"], limit=limit,
                                                           leases={"sm": lease}, default_lease=lease))
        assert len(got) <= limit
        return multiple(*[job.fence for job in got])

    @rule(worker=st.sampled_from(WORKERS))
    def renew(self, worker: str) -> None:
        held = [Fence(job_id=r.id, kind="sm", claimed_by=worker, run_count=r.run_count)
                for r in self._rows().values() if r.status == "claimed" and r.claimed_by == worker]
        with Session(self.engine) as s, s.begin():
            result = leases.renew(self.models, s, RenewParams(worker_id=worker, runs=held,
                                                              lease=timedelta(minutes=1)))
        assert result.renewed == set(held) and not result.lost

    @rule(fence=fences, what=st.sampled_from(["complete", "pause", "retry", "die", "release"]))
    def finish(self, fence: Fence, what: str) -> None:
        before = self._row(fence.job_id)
        fresh = (before is not None and before.status == "claimed" and before.claimed_by == fence.claimed_by
                 and before.run_count == fence.run_count)
        params = self._params(fence, what, before)
        with Session(self.engine) as s, s.begin():
            recorded = finish(self.models, s, params)
        assert (recorded is not None) == fresh
        if fresh:
            assert recorded is params.outcome  # no cancel request is ever stored here
        after = self._row(fence.job_id)
        if not fresh:
            assert after == before, "a stale fence changed a row"
            return
        self.journal_rows += 1
        assert after.claimed_by is None and after.claim_expires_at is None

    def _params(self, fence: Fence, what: str, row: Any) -> FinishParams:
        if what == "complete":
            return FinishParams(fence=fence, outcome=Outcome.COMPLETED, note="done")
        if what == "pause":
            return FinishParams(fence=fence, outcome=Outcome.PAUSED, carry={"step": 1}, save_carry=True)
        if what == "die":
            return FinishParams(fence=fence, outcome=Outcome.DEAD, note="die")
        if what == "release":
            return FinishParams(fence=fence, outcome=Outcome.RELEASED)
        # A retryable failure: dead at the backstop, as the executor decides.
        backstop = row is not None and row.failure_count + 1 >= MAX_FAILURES
        return FinishParams(fence=fence, outcome=Outcome.DEAD if backstop else Outcome.RETRIED, failure=True)

    @rule()
    def expire_leases(self) -> None:
        with self.engine.begin() as conn:
            conn.execute(sa.text(f"UPDATE {self.models.prefix}_jobs SET claim_expires_at = now() - "
                                 "interval '1 second' WHERE status = 'claimed'"))

    @rule()
    def recover(self) -> None:
        with Session(self.engine) as s, s.begin():
            got = recovery.recover(self.models, s, RecoverParams(max_failures={"sm": MAX_FAILURES}))
        self.journal_rows += len(got)

    @rule()
    def cleanup(self) -> None:
        cutoff = datetime.now(timezone.utc) + timedelta(hours=1)
        gone_journal = 0
        with Session(self.engine) as s, s.begin():
            gone_journal = s.execute(sa.text(
                f"SELECT count(*) FROM {self.models.prefix}_journal j JOIN {self.models.prefix}_jobs b "
                "ON b.id = j.job_id WHERE b.status IN ('completed', 'dead')")).scalar_one()
            deleted = s.execute(delete_batch_statement(self.models, CleanupParams(cutoff=cutoff))).all()
        self.removed += len(deleted)
        self.journal_rows -= gone_journal
        self.terminal.clear()

    # -- invariants --------------------------------------------------------------------------
    @invariant()
    def rows_are_consistent(self) -> None:
        rows = self._rows()
        counts = {s: 0 for s in ("pending", "claimed", "completed", "dead")}
        for r in rows.values():
            counts[r.status] += 1  # exactly one known status each
            assert 0 <= r.failure_count <= MAX_FAILURES, r
            assert (r.status == "claimed") == (r.claim_expires_at is not None) == (r.claimed_by is not None), r
            assert (r.status in TERMINAL) == (r.finished_at is not None), r
            if r.status in TERMINAL:
                if r.id in self.terminal:
                    assert self.terminal[r.id] == r, "a terminal row changed"
                self.terminal[r.id] = r
        assert self.enqueued == sum(counts.values()) + self.removed, (self.enqueued, counts, self.removed)

    @invariant()
    def one_journal_row_per_outcome(self) -> None:
        with self.engine.connect() as conn:
            n = conn.execute(sa.text(f"SELECT count(*) FROM {self.models.prefix}_journal")).scalar_one()
        assert n == self.journal_rows


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_queue_state_machine(db: sa.Engine, rel_prefix: str) -> None:
    """Random interleavings of every storage verb keep the queue invariants."""
    QueueMachine.engine = db
    QueueMachine.queue = Queue(make_models(rel_prefix), [Keyed])
    run_state_machine_as_test(QueueMachine, settings=settings(
        max_examples=40, stateful_step_count=30, deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much]))
