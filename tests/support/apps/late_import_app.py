"""An application that creates its psycopg 3 engine *before* it imports venturi (run as a fresh process).

``python late_import_app.py sync|async`` reads ``VENTURI_DSN`` (any
``postgresql`` URL; its driver is replaced by psycopg's) and
``VENTURI_PREFIX`` (an already migrated queue).  It creates its engines and
opens one pooled connection first, as a FastAPI project's ``app/core/db.py``
does at import, and only then imports ``venturi_sa``.  It then makes a job
that waits for its parent and one that waits for a signal with no deadline
(both ``visible_at = 'infinity'``), reads them through ``get_job``,
``explain``, ``history``, the application's own ORM session and the
dashboard (sync), drains them with the testing helper and a worker, and
prints one ``OK <what>`` line per step.  Any failure ends it with a traceback
and exit status 1.
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any

import sqlalchemy as sa

UTC = {"options": "-c timezone=UTC"}


def url(driver: str) -> str:
    return sa.make_url(os.environ["VENTURI_DSN"]).set(drivername=f"postgresql+{driver}").render_as_string(
        hide_password=False)


def ok(what: str) -> None:
    print(f"OK {what}", flush=True)


def build_queue() -> Any:
    from venturi_sa import JobContext, Queue, make_models

    queue = Queue(make_models(os.environ["VENTURI_PREFIX"]))

    @queue.task("first")
    def first(payload: dict[str, Any], ctx: JobContext) -> str:
        return "first"

    @queue.task("then")
    def then(payload: dict[str, Any], ctx: JobContext) -> str:
        return "then"

    @queue.task("approval")
    def approval(payload: dict[str, Any], ctx: JobContext) -> Any:
        return ctx.wait_for("approved")

    return queue


def read_waiting(queue: Any, engine: sa.Engine, ids: dict[str, str]) -> None:
    from sqlalchemy.orm import Session

    reasons = {"then": "waiting_on_parents", "approval": "waiting_for_signal"}
    for name in ("then", "approval"):
        job = queue.get_job(engine, ids[name])
        assert job.status == "pending" and job.visible_at.year == 9999, job
        ok(f"get_job {name}")
        assert reasons[name] in queue.explain(engine, ids[name]).codes
        ok(f"explain {name}")
        with Session(engine) as session:
            row = session.get(queue.models.Job, ids[name])
            assert row is not None and row.visible_at.year == 9999, row
        ok(f"session.get {name}")
    listed = {job.id for job in queue.history(engine, status="pending").items}
    assert {ids["then"], ids["approval"]} <= listed, listed
    ok("history")


def read_dashboard(queue: Any, engine: sa.Engine, ids: dict[str, str]) -> None:
    from starlette.testclient import TestClient

    from venturi_sa.web import create_app

    app = create_app(engine, queue.prefix, listen=False, tasks=queue.registry)
    with TestClient(app) as client:
        for name in ("then", "approval"):
            response = client.get(f"/jobs/{ids[name]}")
            assert response.status_code == 200, response.text
        assert client.get("/jobs", params={"status": "pending"}).status_code == 200
    ok("dashboard")


def run_sync() -> None:
    engine = sa.create_engine(url("psycopg"), connect_args=dict(UTC))
    with engine.connect() as conn:  # a pooled connection opened before venturi is imported
        conn.exec_driver_sql("SELECT 1")
    assert "venturi_sa" not in sys.modules
    from sqlalchemy.orm import Session

    from venturi_sa import Worker
    from venturi_sa.testing import drain

    queue = build_queue()
    with Session(engine) as session, session.begin():
        first = queue.enqueue(session, queue.registry.get("first")())
        then = queue.enqueue(session, queue.registry.get("then")(), after=[first])
        approval = queue.enqueue(session, queue.registry.get("approval")())
        ids = {"first": first.id, "then": then.id, "approval": approval.id}
    assert Worker(queue, engine, kinds=["approval"]).run_until_idle() == 1
    read_waiting(queue, engine, ids)
    read_dashboard(queue, engine, ids)
    with Session(engine) as session, session.begin():
        result = drain(session, queue)  # rolled back with the session
        assert sorted(r.kind for r in result.runs) == ["first", "then"], result
        session.rollback()
    ok("drain")
    assert Worker(queue, engine).run_until_idle() == 2
    queue.signal(engine, ids["approval"], "approved", "yes")
    assert Worker(queue, engine).run_until_idle() == 1
    assert [queue.get_job(engine, ids[n]).status for n in ("then", "approval")] == ["completed"] * 2
    ok("worker")
    engine.dispose()


async def read_async(queue: Any, engine: Any, ids: dict[str, str]) -> None:
    reasons = {"then": "waiting_on_parents", "approval": "waiting_for_signal"}
    for name in ("then", "approval"):
        job = await queue.get_job_async(engine, ids[name])
        assert job.status == "pending" and job.visible_at.year == 9999, job
        ok(f"get_job {name}")
        assert reasons[name] in (await queue.explain_async(engine, ids[name])).codes
        ok(f"explain {name}")
    listed = {job.id for job in (await queue.history_async(engine, status="pending")).items}
    assert {ids["then"], ids["approval"]} <= listed, listed
    ok("history")


def run_async() -> None:
    from sqlalchemy.ext.asyncio import AsyncSession, create_async_engine

    engine = create_async_engine(url("psycopg_async"), connect_args=dict(UTC))  # the application's, on its loop
    worker_engine = create_async_engine(url("psycopg_async"), connect_args=dict(UTC))  # a worker needs its own

    async def opened() -> None:
        async with engine.connect() as conn:  # a pooled connection opened before venturi is imported
            await conn.exec_driver_sql("SELECT 1")

    loop = asyncio.new_event_loop()
    loop.run_until_complete(opened())
    assert "venturi_sa" not in sys.modules
    from venturi_sa import Worker

    queue = build_queue()

    async def enqueue() -> dict[str, str]:
        async with AsyncSession(engine) as session, session.begin():
            first = await queue.enqueue_async(session, queue.registry.get("first")())
            then = await queue.enqueue_async(session, queue.registry.get("then")(), after=[first])
            approval = await queue.enqueue_async(session, queue.registry.get("approval")())
            return {"first": first.id, "then": then.id, "approval": approval.id}

    ids = loop.run_until_complete(enqueue())
    assert Worker(queue, worker_engine, kinds=["approval"]).run_until_idle() == 1
    loop.run_until_complete(read_async(queue, engine, ids))
    assert Worker(queue, worker_engine).run_until_idle() == 2
    loop.run_until_complete(queue.signal_async(engine, ids["approval"], "approved", "yes"))
    assert Worker(queue, worker_engine).run_until_idle() == 1
    ok("worker")
    loop.run_until_complete(engine.dispose())
    loop.close()


if __name__ == "__main__":
    run_sync() if sys.argv[1] == "sync" else run_async()
