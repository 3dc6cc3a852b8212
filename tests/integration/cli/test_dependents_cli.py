"""``venturi jobs show`` lists parents and dependents; ``venturi jobs cancel --with-dependents``."""

from __future__ import annotations

import json
from typing import Any

import pytest
import sqlalchemy as sa
from support.cli import invoke as run
from support.cli import ok, plain_url
from support.workers import enqueue, job_row

from venturi_sa import JobContext, Queue, Task

pytestmark = pytest.mark.timeout(60)


class Step(Task):
    KIND = "step"

    def run(self, ctx: JobContext) -> None:
        pass


def test_show_lists_both_and_cancel_follows_dependents(pg_url: str, prefix: str, models: Any,
                                                       engine: sa.Engine) -> None:
    db = ["--dsn", plain_url(pg_url), "--prefix", prefix]
    queue = Queue(models, [Step])
    [a] = enqueue(engine, queue, Step())
    [b] = enqueue(engine, queue, Step(), after=[a], if_parent_dead="run")
    [c] = enqueue(engine, queue, Step(), after=[b])
    text = ok(run("jobs", "show", *db, b)).stdout
    assert "parents:" in text and a in text and "dependents:" in text and c in text
    data = json.loads(ok(run("jobs", "show", *db, b, "--json")).stdout)
    assert [p["id"] for p in data["parents"]] == [a]
    assert [(d["id"], d["if_parent_dead"]) for d in data["dependents"]] == [(c, "cancel")]
    assert "waiting for 1 of 1 parents" in ok(run("jobs", "why", *db, c)).stdout
    assert "waiting for parents: 2" in ok(run("stats", *db)).stdout
    ok(run("jobs", "cancel", *db, a, "--with-dependents"))
    assert [job_row(engine, models, j).status for j in (a, b, c)] == ["dead", "dead", "dead"]


def test_cancel_with_dependents_of_an_ended_job_cancels_its_released_dependents(
        pg_url: str, prefix: str, models: Any, engine: sa.Engine) -> None:
    db = ["--dsn", plain_url(pg_url), "--prefix", prefix]
    queue = Queue(models, [Step])
    [a] = enqueue(engine, queue, Step())
    [b] = enqueue(engine, queue, Step(), after=[a], if_parent_dead="run")
    queue.kill(engine, a)  # b is released under "run"
    assert job_row(engine, models, b).status == "pending"
    text = ok(run("jobs", "cancel", *db, a, "--with-dependents")).stdout
    assert f"job {a} (step): already dead; its dependents not yet ended were cancelled" in text
    assert job_row(engine, models, b).status == "dead"


def test_retry_with_dependents_requeues_what_the_death_killed(pg_url: str, prefix: str, models: Any,
                                                              engine: sa.Engine) -> None:
    db = ["--dsn", plain_url(pg_url), "--prefix", prefix]
    queue = Queue(models, [Step])
    [a] = enqueue(engine, queue, Step())
    [b] = enqueue(engine, queue, Step(), after=[a])
    queue.kill(engine, a)
    assert job_row(engine, models, b).status == "dead"
    ok(run("jobs", "retry", *db, a, "--with-dependents", "-m", "fixed"))
    assert [job_row(engine, models, j).status for j in (a, b)] == ["pending", "pending"]
    assert "waiting for 1 of 1 parents" in ok(run("jobs", "why", *db, b)).stdout
