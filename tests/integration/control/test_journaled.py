"""Every operator action is recorded durably with its actor and note (journal, or the pause record)."""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa
from support.workers import enqueue, journal

from venturi_sa import JobContext, Queue, Task

pytestmark = pytest.mark.timeout(60)


class Plain(Task):
    KIND = "plain"

    def run(self, ctx: JobContext) -> None:
        pass


def claim(engine: sa.Engine, models: Any, job_id: str, lease: str = "1 minute") -> None:
    """Mark the job claimed by another worker, its lease ending ``lease`` from now (negative: expired)."""
    with engine.begin() as conn:
        conn.execute(sa.update(models.jobs_table).where(models.jobs_table.c.id == job_id).values(
            status="claimed", claimed_by="other-host:1", run_count=models.jobs_table.c.run_count + 1,
            claim_expires_at=sa.func.now() + sa.cast(lease, sa.Interval)))


def test_every_admin_action_names_its_actor(engine: sa.Engine, models: Any) -> None:
    queue = Queue(models, [Plain])
    a, b, c = enqueue(engine, queue, Plain(), Plain(), Plain())
    queue.edit(engine, a, priority=0, note="vip", actor="u1")
    queue.retry_now(engine, a, "now", actor="u2")
    queue.kill(engine, a, "bad", actor="u3")
    queue.requeue(engine, a, "fixed", actor="u4")
    queue.cancel(engine, a, "dup", actor="u5")
    claim(engine, models, b)
    queue.release(engine, b, "host gone", actor="u6")
    claim(engine, models, c)
    queue.cancel(engine, c, "stop", actor="u7")
    assert [e.note for e in journal(engine, models, a)] == [
        "edited by u1: priority -> 0 (vip)", "edited by u2: run now (now)", "killed by u3: bad",
        "requeued by u4: fixed", "cancelled by u5: dup"]
    assert [e.note for e in journal(engine, models, b)] == ["released by u6: host gone"]
    with engine.connect() as conn:  # a running job's cancel is a durable request until its run ends
        request = conn.execute(sa.select(models.cancels_table)).one()
    assert (request.job_id, request.run_no, request.actor, request.note) == (c, 1, "u7", "stop")
    queue.pause(engine, "plain", reason="why", actor="u8")
    queue.resume(engine, "plain", actor="u9")
    [record] = queue.pauses(engine, in_force_only=False)
    assert (record.actor, record.reason, record.resumed_by) == ("u8", "why", "u9")


def test_a_requeued_job_forgets_an_old_cancel_request(engine: sa.Engine, models: Any) -> None:
    queue = Queue(models, [Plain])
    [job_id] = enqueue(engine, queue, Plain())
    claim(engine, models, job_id)
    queue.cancel(engine, job_id)
    with engine.begin() as conn:  # the run ended dead (as its worker would record it)
        conn.execute(sa.update(models.jobs_table).values(status="dead", finished_at=sa.func.now(),
                                                         claimed_by=None, claim_expires_at=None))
    queue.requeue(engine, job_id)
    with engine.connect() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(models.cancels_table)).scalar_one() == 0


def test_cancel_of_a_claim_whose_lease_expired_ends_it_now(engine: sa.Engine, models: Any) -> None:
    """Its worker is gone: no renewal would ever read a request, so the job ends dead at once."""
    queue = Queue(models, [Plain])
    [job_id] = enqueue(engine, queue, Plain())
    claim(engine, models, job_id, lease="-1 second")
    done = queue.cancel(engine, job_id, "host gone", actor="ops")
    assert (done.result, done.status) == ("cancelled", "dead")
    assert [(e.outcome, e.note) for e in journal(engine, models, job_id)] == [
        ("dead", "cancelled by ops: host gone (lease expired)")]
