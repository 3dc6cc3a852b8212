"""An archived job keeps its links: parents, dependents, steps, signals and result, through the queue's reads,
``venturi jobs show`` and the dashboard's job page, whichever of parent and dependent has moved."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from marshmallow import Schema, fields
from sqlalchemy.orm import Session
from support.archives import places
from support.cli import invoke, ok, plain_url
from support.queues import drain
from support.workers import enqueue

from venturi_sa import JobContext, Queue, Task

TestClient = pytest.importorskip("starlette.testclient").TestClient
from venturi_sa.web import create_app  # noqa: E402


class Number(Schema):
    n = fields.Integer(required=True)


class Part(Task):
    KIND = "part"
    Payload = Number

    def run(self, ctx: JobContext) -> Any:
        return self.payload["n"]


class Export(Task):
    """A fan-in with a durable step and a signal: the sum of its parts, once ``go`` arrives."""

    KIND = "export"

    def run(self, ctx: JobContext) -> Any:
        total = ctx.step("sum_parts", lambda: sum(p.result or 0 for p in ctx.parents))
        return {"total": total, "go": ctx.wait_for("go", timeout=3600)}


@pytest.fixture
def queue(models: Any) -> Queue:
    return Queue(models, [Part, Export], archive_after=None)


def deps(queue: Queue, engine: sa.Engine, job_id: str) -> list[tuple[str, str]]:
    return [(d.id, d.status) for d in queue.dependents(engine, job_id)]


def show(pg_url: str, models: Any, job_id: str) -> dict[str, Any]:
    result = ok(invoke("jobs", "show", job_id, "--json", "--dsn", plain_url(pg_url), "--prefix", models.prefix))
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def test_a_completed_fan_in_and_its_parents_all_archived_keep_their_links(
        pg_url: str, engine: sa.Engine, models: Any, queue: Queue) -> None:
    parts = enqueue(engine, queue, Part(n=10), Part(n=20), Part(n=30))
    [export] = enqueue(engine, queue, Export(), after=parts)
    queue.signal(engine, export, "go", {"by": "ann"})
    drain(queue, engine)
    live_steps, live_signals = queue.steps(engine, export), queue.signals(engine, export)
    assert queue.archive(engine) == 4
    live, archived, _ = places(engine, models)
    assert sorted(archived) == sorted([*parts, export]) and not live

    assert [(p.id, p.status, p.result) for p in queue.parents(engine, export)] == [
        (parts[0], "completed", 10), (parts[1], "completed", 20), (parts[2], "completed", 30)]
    for part in parts:
        assert deps(queue, engine, part) == [(export, "completed")]
    assert queue.steps(engine, export) == live_steps and [s.name for s in live_steps] == ["sum_parts", "go"]
    assert queue.signals(engine, export) == live_signals and len(live_signals) == 1
    assert queue.result(engine, export) == {"total": 60, "go": {"by": "ann"}}

    shown = show(pg_url, models, export)
    assert [p["id"] for p in shown["parents"]] == parts
    assert [s["name"] for s in shown["steps"]] == ["sum_parts", "go"]
    shown = show(pg_url, models, parts[0])
    assert [d["id"] for d in shown["dependents"]] == [export]
    assert shown["pages"]["dependents"]["counts"] == {"completed": 1}

    with TestClient(create_app(engine, models.prefix, listen=False)) as client:
        page = client.get(f"/jobs/{export}").text
        assert all(p in page for p in parts) and "sum_parts" in page
        page = client.get(f"/jobs/{parts[1]}").text
        assert export in page


def test_dependents_live_and_archived_beside_an_archived_parent(
        engine: sa.Engine, models: Any, queue: Queue) -> None:
    [parent] = enqueue(engine, queue, Part(n=1))
    [first] = enqueue(engine, queue, Part(n=2), after=[parent])
    drain(queue, engine)
    assert queue.archive(engine) == 2  # the parent, then its completed dependent, in one batch
    [later] = enqueue(engine, queue, Part(n=3), after=[parent], delay=timedelta(hours=1))  # named once archived
    assert deps(queue, engine, parent) == [(first, "completed"), (later, "pending")]
    assert [(p.id, p.status) for p in queue.parents(engine, later)] == [(parent, "completed")]
    assert [(p.id, p.status) for p in queue.parents(engine, first)] == [(parent, "completed")]


def test_a_dependent_stays_live_while_its_ended_parent_is_live(
        engine: sa.Engine, models: Any, queue: Queue) -> None:
    [parent] = enqueue(engine, queue, Part(n=1))
    with Session(engine) as session, session.begin():
        slow = queue.enqueue(session, Part(n=5), delay=timedelta(hours=1)).id
    [quick] = enqueue(engine, queue, Part(n=2), after=[parent])
    [waiting] = enqueue(engine, queue, Part(n=3), after=[parent, slow])
    drain(queue, engine)
    assert queue.get_job(engine, quick).status == "completed"
    assert queue.archive(engine) == 0  # the parent waits for `waiting`; `quick` for its parent
    assert deps(queue, engine, parent) == [(quick, "completed"), (waiting, "pending")]

    queue.retry_now(engine, slow)
    drain(queue, engine)
    assert queue.archive(engine) == 4
    assert deps(queue, engine, parent) == [(quick, "completed"), (waiting, "completed")]
    assert deps(queue, engine, slow) == [(waiting, "completed")]
    assert [p.id for p in queue.parents(engine, waiting)] == [parent, slow]


def test_a_pass_goes_on_past_batches_of_dependents_held_for_their_parent(
        engine: sa.Engine, models: Any, queue: Queue) -> None:
    [parent] = enqueue(engine, queue, Part(n=1))
    with Session(engine) as session, session.begin():
        slow = queue.enqueue(session, Part(n=5), delay=timedelta(hours=1)).id
    held = enqueue(engine, queue, Part(n=2), Part(n=3), after=[parent])
    enqueue(engine, queue, Part(n=4), after=[parent, slow])  # keeps the parent live
    drain(queue, engine)
    others = enqueue(engine, queue, *[Part(n=10 + n) for n in range(4)])
    drain(queue, engine)  # they finish after the held dependents
    assert queue.archive(engine, batch_size=2) == 4  # the first batch picks the held two only
    live, archived, _ = places(engine, models)
    assert sorted(archived) == sorted(others) and set(held) <= live
