"""``venturi jobs cancel|why|edit|retry-now|show``, ``venturi pause|resume|pauses`` against a real database."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from click.testing import Result
from support.cli import fails, ok, plain_url
from support.cli import invoke as run
from support.workers import enqueue, journal

from venturi_sa import JobContext, Queue, Task

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def db(pg_url: str, prefix: str, models: Any) -> list[str]:
    """``--dsn``/``--prefix`` arguments for this test's migrated queue."""
    return ["--dsn", plain_url(pg_url), "--prefix", prefix]


def as_json(result: Result) -> Any:
    return json.loads(ok(result).stdout)


class Plain(Task):
    KIND = "plain"

    def run(self, ctx: JobContext) -> None:
        pass


def test_cancel_why_edit_and_retry_now(db: list[str], engine: sa.Engine, models: Any) -> None:
    queue = Queue(models, [Plain])
    a, b = enqueue(engine, queue, Plain(), Plain())
    env = {"VENTURI_ACTOR": "carol"}
    assert f"job {b} (plain) is pending" in ok(run("jobs", "why", *db, b)).stdout
    text = ok(run("jobs", "edit", *db, b, "--priority", "0", "--delay", "1h", "-m", "vip", env=env)).stdout
    assert f"job {b} (plain): priority 0" in text
    assert as_json(run("jobs", "why", *db, b, "--json"))["reasons"][0]["code"] == "scheduled"
    assert "eligible now" in ok(run("jobs", "retry-now", *db, b, env=env)).stdout
    out = ok(run("jobs", "cancel", *db, a, "-m", "dup", env=env)).stdout
    assert f"job {a} (plain): cancelled (dead)" in out
    fails(run("jobs", "cancel", *db, a), "already dead")
    fails(run("jobs", "cancel", *db), "give job IDs or --kind")
    assert [e.note for e in journal(engine, models, a)] == ["cancelled by carol: dup"]
    assert [e.note for e in journal(engine, models, b)] == [
        "edited by carol: priority -> 0; run in 3600s (vip)", "edited by carol: run now"]
    data = as_json(run("jobs", "cancel", *db, "--kind", "plain", "--json"))
    assert [c["job_id"] for c in data["cancelled"]] == [b]


def test_pause_resume_and_list(db: list[str]) -> None:
    env = {"VENTURI_ACTOR": "dave"}
    text = ok(run("pause", *db, "mail", "--reason", "smtp outage", "--for", "30m", env=env)).stdout
    assert text.startswith("mail: paused by dave") and "smtp outage" in text
    fails(run("pause", *db, "mail"), "--reason")
    listed = as_json(run("pauses", *db, "--json"))
    assert [(p["kind"], p["actor"]) for p in listed] == [("mail", "dave")]
    assert "paused: mail by dave" in ok(run("stats", *db)).stdout
    assert "resumed by dave" in ok(run("resume", *db, "mail", env=env)).stdout
    fails(run("resume", *db, "mail"), "not paused")
    assert "no kind is paused" in ok(run("pauses", *db)).stdout
    assert "mail" in ok(run("pauses", *db, "--all")).stdout


def test_show_and_why_print_an_enqueue_time_limit(db: list[str], engine: sa.Engine, models: Any) -> None:
    queue = Queue(models, [Plain])
    [job_id] = enqueue(engine, queue, Plain(), timeout=timedelta(minutes=2))
    assert "time limit:    2m" in ok(run("jobs", "show", *db, job_id)).stdout
    assert as_json(run("jobs", "show", *db, job_id, "--json"))["job"]["timeout"] == 120.0
    assert "time limit: 120s" in ok(run("jobs", "why", *db, job_id)).stdout
