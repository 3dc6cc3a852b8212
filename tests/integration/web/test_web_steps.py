"""The dashboard's job page shows a job's durable steps interleaved with its journal."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from starlette.testclient import TestClient
from support.hooks import drain
from support.workers import enqueue

from venturi_sa import JobContext, Queue, Task


class Idle(Task):
    KIND = "idle_no_steps"

    def run(self, ctx: JobContext) -> Any:
        return None


class Charge(Task):
    KIND = "charge_then_sleep"

    def run(self, ctx: JobContext) -> Any:
        ctx.step("charge", lambda: {"charge_id": "ch_1"})
        ctx.sleep(3600, name="cool-off")


def test_the_job_page_shows_steps_with_the_journal(client: TestClient, engine: sa.Engine, models: Any) -> None:
    queue = Queue(models, [Charge, Idle])
    [job_id, plain] = enqueue(engine, queue, Charge(), Idle())
    drain(queue, engine)
    page = client.get(f"/jobs/{job_id}").text
    steps = page[page.index('id="steps"'):]
    at = [steps.index(word) for word in (">charge<", "ch_1", ">cool-off<", "wakes at", ">paused<")]
    assert at == sorted(at)
    assert "sleeping (cool-off) until" in page  # why it waits, from explain
    assert 'id="steps"' not in client.get(f"/jobs/{plain}").text  # no steps, no section
