"""``queue.explain``: one concrete reason per situation, read from the database."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from support.queues import drain
from support.workers import enqueue

from venturi_sa import JobContext, Queue, Retry, Task
from venturi_sa.errors import JobNotFound

pytestmark = pytest.mark.timeout(60)


def make_queue(models: Any) -> Queue:
    class Flaky(Task):
        KIND = "flaky"

        def run(self, ctx: JobContext) -> Retry:
            return Retry(delay=timedelta(hours=1), note="smtp down")

    class Plain(Task):
        KIND = "plain"

        def run(self, ctx: JobContext) -> None:
            pass

    return Queue(models, [Flaky, Plain])


def test_each_reason(engine: sa.Engine, models: Any) -> None:
    queue = make_queue(models)
    plain = queue.registry.get("plain")

    # no worker has run this kind lately, and the job is eligible
    [lonely] = enqueue(engine, queue, plain())
    assert queue.explain(engine, lonely).codes == ["no_worker"]
    drain(queue, engine, kinds=["plain"])
    assert queue.explain(engine, lonely).codes == ["completed"]

    # scheduled for later; behind older eligible jobs
    [later] = enqueue(engine, queue, plain(), delay=timedelta(hours=2))
    first, second = enqueue(engine, queue, plain(), plain())
    why = queue.explain(engine, later)
    assert why.codes == ["scheduled"] and why.reasons[0].until is not None
    assert queue.explain(engine, second).codes == ["behind"]
    assert "behind 1 eligible 'plain' job" in str(queue.explain(engine, second))
    assert queue.explain(engine, first).codes == ["eligible"]

    # paused (who, why, until)
    queue.pause(engine, "plain", reason="vendor outage", actor="ops", delay=timedelta(minutes=5))
    text = str(queue.explain(engine, first))
    assert queue.explain(engine, first).codes == ["paused"]
    assert "paused by ops" in text and "vendor outage" in text and " until " in text
    queue.resume(engine, "plain")

    # in backoff after a failure, then dead with its last note
    [flaky] = enqueue(engine, queue, queue.registry.get("flaky")())
    drain(queue, engine, kinds=["flaky"])
    why = queue.explain(engine, flaky)
    assert why.codes == ["backoff"] and "after failure 1 (smtp down)" in str(why)
    queue.kill(engine, flaky, "gave up", actor="ops")
    why = queue.explain(engine, flaky)
    assert why.codes == ["dead"] and "killed by ops: gave up" in str(why)

    # claimed: by whom, lease until when, and a pending cancel request
    with engine.begin() as conn:
        conn.execute(sa.update(models.jobs_table).where(models.jobs_table.c.id == first).values(
            status="claimed", claimed_by="host:42", run_count=1,
            claim_expires_at=sa.func.now() + sa.text("interval '1 minute'")))
    why = queue.explain(engine, first)
    assert why.codes == ["claimed"] and "claimed by host:42 (run 1)" in str(why)
    queue.cancel(engine, first, "wrong customer", actor="alice")
    why = queue.explain(engine, first)
    assert why.codes == ["claimed", "cancel_requested"]
    assert "cancel requested by alice" in str(why) and why.as_dict()["reasons"][1]["code"] == "cancel_requested"

    with pytest.raises(JobNotFound):
        queue.explain(engine, "nope")
