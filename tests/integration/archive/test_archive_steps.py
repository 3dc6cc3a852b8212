"""An archived job keeps its steps, signals and limit key (v14): read from the archive, put back by a requeue."""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa
from marshmallow import Schema, fields
from support.archives import archived_row, places
from support.queues import drain
from support.workers import enqueue

from venturi_sa import Die, JobContext, JobNotFound, Queue, Task

calls: list[str] = []
declined: list[bool] = []


@pytest.fixture(autouse=True)
def _reset() -> None:
    calls.clear()
    declined[:] = [True]


class Checkout(Task):
    """charge, a gift note (None), the approval signal, then a decline on its first run."""

    KIND = "checkout"

    def run(self, ctx: JobContext) -> Any:
        charge = ctx.step("charge", lambda: calls.append("charge") or {"id": ctx.step_key("charge")})
        ctx.step("gift", lambda: calls.append("gift"))
        approval = ctx.wait_for("approved", timeout=3600)
        if declined[0]:
            return Die("card declined")
        return {"charge": charge, "approval": approval}


@pytest.fixture
def queue(models: Any) -> Queue:
    return Queue(models, [Checkout], archive_after=None)


def durable(queue: Queue, engine: sa.Engine, job_id: str) -> tuple[list[Any], list[Any]]:
    return queue.steps(engine, job_id), queue.signals(engine, job_id)


def test_archiving_keeps_steps_and_signals_and_a_requeue_replays_them(
        engine: sa.Engine, models: Any, queue: Queue) -> None:
    [job_id] = enqueue(engine, queue, Checkout())
    assert queue.signal(engine, job_id, "approved", {"by": "ann"}).result == "stored"
    drain(queue, engine)
    assert queue.get_job(engine, job_id).status == "dead" and calls == ["charge", "gift"]
    before = durable(queue, engine, job_id)
    assert [(s.name, s.entry, s.result) for s in before[0]] == [
        ("charge", "step", {"id": f"{job_id}:charge"}), ("gift", "step", None), ("approved", "wait", {"by": "ann"})]

    assert queue.archive(engine) == 1
    live, archived, _ = places(engine, models)
    assert job_id not in live and archived == [job_id]
    with engine.connect() as conn:  # the cascade took the live rows: what is read below is the archive's
        for table in (models.steps_table, models.signals_table):
            assert conn.execute(sa.select(sa.func.count()).select_from(table)).scalar_one() == 0
    row = archived_row(engine, models, job_id)
    assert [s["name"] for s in row.steps] == ["charge", "gift", "approved"] and len(row.signals) == 1
    assert durable(queue, engine, job_id) == before  # the same records, read from the archive

    declined[0] = False
    queue.requeue(engine, job_id, note="card replaced")
    assert places(engine, models)[1] == [] and durable(queue, engine, job_id) == before  # put back as they were
    drain(queue, engine)
    assert calls == ["charge", "gift"]  # replayed, not charged again
    assert queue.result(engine, job_id) == {"charge": {"id": f"{job_id}:charge"}, "approval": {"by": "ann"}}


def test_a_job_without_steps_archives_none_and_an_unknown_id_is_not_found(
        engine: sa.Engine, models: Any, queue: Queue) -> None:
    class Plain(Task):
        KIND = "plain"

        def run(self, ctx: JobContext) -> None:
            return None

    plain = Queue(models, [Plain], archive_after=None)
    [job_id] = enqueue(engine, plain, Plain())
    drain(plain, engine)
    assert plain.archive(engine) == 1
    row = archived_row(engine, models, job_id)
    assert (row.steps, row.signals) == (None, None)
    assert durable(plain, engine, job_id) == ([], [])
    for read in (plain.steps, plain.signals):
        with pytest.raises(JobNotFound):
            read(engine, "01NOSUCHJOB0000000000000000")


class Tenant(Schema):
    tenant = fields.String(required=True)


class Export(Task):
    """A keyed kind that dies: requeued from the archive, it must come back under its key."""

    KIND = "export"
    Payload = Tenant
    key_concurrency = 1

    def limit_key(self) -> str | None:
        return str(self.payload["tenant"])

    def run(self, ctx: JobContext) -> Die:
        return Die("tenant suspended")


def test_a_requeue_from_the_archive_restores_the_limit_key(engine: sa.Engine, models: Any) -> None:
    queue = Queue(models, [Export], archive_after=None)
    [job_id] = enqueue(engine, queue, Export(tenant="acme"))
    keys = models.Limits.Key.__table__

    def key_rows() -> list[tuple[str, str, str]]:
        with engine.connect() as conn:
            return [tuple(r) for r in conn.execute(sa.select(keys.c.job_id, keys.c.kind, keys.c.key))]

    assert key_rows() == [(job_id, "export", "acme")]
    drain(queue, engine)
    assert queue.archive(engine) == 1
    assert key_rows() == [] and archived_row(engine, models, job_id).limit_key == "acme"
    queue.requeue(engine, job_id)
    assert key_rows() == [(job_id, "export", "acme")]  # claimed under its key's limit again
