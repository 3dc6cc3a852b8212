"""``venturi jobs signal``, and ``jobs show`` / ``jobs why`` for a job with durable steps."""

from __future__ import annotations

import json
from typing import Any

import pytest
import sqlalchemy as sa
from support.cli import fails, ok, plain_url
from support.cli import invoke as run
from support.hooks import drain
from support.workers import enqueue

from venturi_sa import JobContext, Queue, Task

pytestmark = pytest.mark.timeout(60)


class Approval(Task):
    KIND = "approval"

    def run(self, ctx: JobContext) -> Any:
        quote = ctx.step("quote", lambda: {"amount": 12})
        return {"quote": quote, "decision": ctx.wait_for("decision", timeout=3600)}


def test_signal_show_and_why(pg_url: str, prefix: str, engine: sa.Engine, models: Any) -> None:
    db = ["--dsn", plain_url(pg_url), "--prefix", prefix]
    queue = Queue(models, [Approval])
    [job_id] = enqueue(engine, queue, Approval())
    drain(queue, engine)
    why = json.loads(ok(run("jobs", "why", *db, job_id, "--json")).stdout)
    assert why["reasons"][0]["code"] == "waiting_for_signal"
    text = ok(run("jobs", "show", *db, job_id)).stdout
    assert "steps and journal:" in text
    timeline = text[text.index("steps and journal:"):]
    at = [timeline.index(word) for word in (" step ", " quote ", " wait ", " decision ", " journal ", " paused ")]
    assert at == sorted(at)  # in time order: the step, the wait, then the run's journal entry
    fails(run("jobs", "signal", *db, job_id, "decision", "--payload", "{not json"), "not JSON")
    out = ok(run("jobs", "signal", *db, job_id, "decision", "--payload", '{"ok": true}')).stdout
    assert f"job {job_id}: signal 'decision' woke" in out
    assert json.loads(ok(run("jobs", "signal", *db, job_id, "decision", "--payload", '{"ok": true}',
                             "--json")).stdout)["result"] == "duplicate"
    fails(run("jobs", "signal", *db, job_id, "decision", "--payload", "1"), "another payload")
    drain(queue, engine)
    shown = json.loads(ok(run("jobs", "show", *db, job_id, "--json")).stdout)
    assert [s["name"] for s in shown["steps"]] == ["quote", "decision"]
    assert shown["steps"][1]["resolution"] == "signal"
