"""venturi behind a real PgBouncer in transaction pool mode, on every driver.

What works there (and is tested): enqueue in the application's session,
dedup (transaction-scoped advisory locks), workers that poll
(``listen=False``), fencing.  What cannot work is detected: a worker that
LISTENs hears nothing through a transaction pooler, says so in one warning
and polls.  Migrations take a session-level advisory lock and are run
against PostgreSQL directly (docs/drivers.md).  The tables are migrated
through the direct engine for that reason.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa
from marshmallow import Schema, fields
from sqlalchemy.orm import Session
from support.docblocks import blocks, exec_block
from support.paths import DOCS
from support.pgbouncer import CONNECT_ARGS, PgBouncer
from support.queues import drain, side_rows, side_table, side_write
from support.waiting import Events, wait_until
from support.workers import enqueue, job_row, journal, running, steal

from venturi_sa import Complete, JobContext, Queue, Task, Worker, make_models
from venturi_sa.models import JobBase
from venturi_sa.worker import listener as listener_module

SYNC = ("psycopg2", "psycopg")
# The module's first test may install pgbouncer (apt-get update + install) in its fixture.
pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def pgbouncer(pg_url: str) -> Iterator[PgBouncer]:
    try:
        bouncer = PgBouncer(pg_url)
    except RuntimeError as exc:
        if os.environ.get("CI"):
            raise
        pytest.skip(f"no pgbouncer: {exc}")
    with bouncer:
        yield bouncer


@pytest.fixture(params=SYNC)
def bounced(request: pytest.FixtureRequest, pgbouncer: PgBouncer) -> Iterator[sa.Engine]:
    """A sync engine whose every connection goes through PgBouncer."""
    engine = pgbouncer.engine(request.param)
    yield engine
    engine.dispose()


class Account(Schema):
    account = fields.Integer(required=True)
    reasons = fields.List(fields.String(), load_default=list)


class Refresh(Task):
    KIND = "refresh"
    Payload = Account

    def dedup_key(self) -> str:
        return f"account:{self.payload['account']}"

    def merge(self, existing: JobBase) -> Any:
        from venturi_sa import Coalesce

        return Coalesce({**existing.payload, "reasons": existing.payload["reasons"] + self.payload["reasons"]})


class Noop(Task):
    KIND = "noop"


def test_it_really_is_a_transaction_pooler(bounced: sa.Engine) -> None:
    """Two transactions of one client connection can run on different server backends."""
    with bounced.connect() as a, bounced.connect() as b:
        a.execute(sa.text("SELECT 1"))
        b.begin()
        held = b.execute(sa.select(sa.func.pg_backend_pid())).scalar_one()  # b holds one server connection
        a.commit()
        assert a.execute(sa.select(sa.func.pg_backend_pid())).scalar_one() != held
        b.rollback()


def test_enqueue_in_the_applications_session(bounced: sa.Engine, engine: sa.Engine, models: Any) -> None:
    queue = Queue(models, [Noop])
    with Session(bounced) as session:
        gone = queue.enqueue(session, Noop()).id
        session.rollback()
        kept = queue.enqueue(session, Noop()).id
        session.commit()
    with engine.connect() as conn:
        assert conn.execute(sa.select(models.Job.id)).scalars().all() == [kept] != [gone]


def test_dedup_serializes_concurrent_enqueuers(bounced: sa.Engine, engine: sa.Engine, models: Any) -> None:
    queue = Queue(models, [Refresh])
    first = Session(bounced)
    queue.enqueue(first, Refresh(account=1, reasons=["a"]))  # holds the key's xact lock, uncommitted
    done = threading.Event()

    def second() -> None:
        with Session(bounced) as session, session.begin():
            queue.enqueue(session, Refresh(account=1, reasons=["b"]))
        done.set()

    thread = threading.Thread(target=second)
    thread.start()
    try:
        wait_until(lambda: _advisory_waiters(engine), what="the second enqueuer to wait on the dedup lock")
        assert not done.is_set()
        first.commit()
        thread.join(20)
        assert done.is_set()
    finally:
        first.close()
    with engine.connect() as conn:
        [row] = conn.execute(sa.select(models.jobs_table)).all()
    assert row.payload == {"account": 1, "reasons": ["a", "b"]}
    assert [e.outcome for e in journal(engine, models, row.id)] == ["merged"]


def _advisory_waiters(engine: sa.Engine) -> int:
    with engine.connect() as conn:
        return int(conn.execute(sa.text(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted")).scalar_one())


def test_a_polling_worker_drains_the_queue(bounced: sa.Engine, engine: sa.Engine, models: Any, prefix: str) -> None:
    side = side_table(engine, prefix)

    class Write(Task):
        KIND = "write"

        def run(self, ctx: JobContext) -> Complete:
            side_write(ctx.session, side, ctx.job_id, ctx.run_count)
            return Complete("written")

    queue = Queue(models, [Write])
    ids = enqueue(bounced, queue, *(Write() for _ in range(40)))
    assert drain(queue, bounced, concurrency=4, listen=False) == 40
    assert {job_row(engine, models, i).status for i in ids} == {"completed"}
    assert len(side_rows(engine, side)) == 40
    events = Events()
    with running(Worker(queue, bounced, listen=False, poll_interval=0.2, on_event=events)):
        [job_id] = enqueue(bounced, queue, Write())
        events.wait_for("finished", job_id=job_id)
    assert [e.outcome for e in journal(engine, models, job_id)] == ["completed"]


def test_fencing_discards_a_zombies_outcome(bounced: sa.Engine, engine: sa.Engine, models: Any, prefix: str,
                                           caplog: pytest.LogCaptureFixture) -> None:
    side = side_table(engine, prefix)

    class Zombie(Task):
        KIND = "zombie"

        def run(self, ctx: JobContext) -> Complete:
            side_write(ctx.session, side, ctx.job_id, ctx.run_count, "late")
            ctx.session.flush()
            steal(bounced, models, ctx.job_id, "zombie")  # through the pooler too
            return Complete("too late")

    queue = Queue(models, [Zombie])
    [job_id] = enqueue(bounced, queue, Zombie())
    with caplog.at_level(logging.WARNING, logger="venturi_sa"):
        drain(queue, bounced, concurrency=1, listen=False)
    row = job_row(engine, models, job_id)
    assert (row.status, row.claimed_by, row.run_count) == ("claimed", "thief:1", 2)
    assert [e.outcome for e in journal(engine, models, job_id)] == ["stale-recovered"]
    assert side_rows(engine, side) == []
    assert any("lease lost" in r.getMessage() for r in caplog.records)


def test_a_listening_worker_warns_once_and_polls(bounced: sa.Engine, models: Any,
                                                 caplog: pytest.LogCaptureFixture,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(listener_module, "PROBE_TIMEOUT", 1.0)
    queue = Queue(models, [Noop])
    events = Events()
    worker = Worker(queue, bounced, poll_interval=0.3, on_event=events)
    with caplog.at_level(logging.WARNING, logger="venturi_sa"), running(worker):
        events.wait_for("idle")
        assert worker.listener is not None
        assert worker.listener.deaf.wait(20)
        [job_id] = enqueue(bounced, queue, Noop())
        events.wait_for("finished", job_id=job_id)
    warnings = [r.getMessage() for r in caplog.records if "heard nothing" in r.getMessage()]
    assert len(warnings) == 1 and "listen=False" in warnings[0] and "PgBouncer" in warnings[0]
    assert not [r for r in caplog.records if "LISTEN connection lost" in r.getMessage()]


# -- asyncpg (the async side's enqueue runs the same statements, here through run_sync) ------

def test_asyncpg_enqueue_and_dedup(pgbouncer: PgBouncer, engine: sa.Engine, models: Any,
                                   monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    from sqlalchemy.ext.asyncio import AsyncSession, create_async_engine

    from venturi_sa.worker.listener import AsyncListener

    monkeypatch.setattr(listener_module, "PROBE_TIMEOUT", 1.0)
    queue = Queue(models, [Refresh])

    async def scenario() -> list[str]:
        bounced = create_async_engine(pgbouncer.url("asyncpg"), connect_args=dict(CONNECT_ARGS["asyncpg"]))
        try:
            ids = []
            for reason in ("a", "b", "c"):  # the same statements again and again: no prepared-statement clash
                async with AsyncSession(bounced) as session, session.begin():
                    job = await session.run_sync(lambda s, r=reason: queue.enqueue(s, Refresh(account=7, reasons=[r])))
                    ids.append(job.id)
            async with AsyncSession(bounced) as session:
                await session.run_sync(lambda s: queue.enqueue(s, Refresh(account=8)))
                await session.rollback()
            wake, stopping = asyncio.Event(), asyncio.Event()
            deaf = AsyncListener(bounced, "venturi_t_bounced", wake, stopping)
            await asyncio.wait_for(deaf.run(), 20)  # returns once the probe went unheard
            assert deaf.deaf.is_set()
            return ids
        finally:
            await bounced.dispose()

    with caplog.at_level(logging.WARNING, logger="venturi_sa"):
        ids = asyncio.run(scenario())
    assert len(set(ids)) == 1
    with engine.connect() as conn:
        [row] = conn.execute(sa.select(models.jobs_table)).all()
    assert row.payload == {"account": 7, "reasons": ["a", "b", "c"]}
    assert len([r for r in caplog.records if "heard nothing" in r.getMessage()]) == 1


# -- docs/drivers.md: its PgBouncer blocks run against this PgBouncer ------------------------

def test_the_drivers_page_pgbouncer_examples_run(pgbouncer: PgBouncer, engine: sa.Engine, prefix: str) -> None:
    page = DOCS / "drivers.md"
    found = blocks(page, tags={"no-run", "pgbouncer"})
    assert len(found) == 2
    queue = Queue(make_models(prefix), [Noop])
    bouncer = pgbouncer.url("psycopg2").split("://", 1)[1]
    namespace: dict[str, Any] = {"bouncer": bouncer, "direct_engine": engine, "queue_prefix": prefix,
                                 "bounced_queue": queue}
    try:
        for line, code in found:
            exec_block(page, line, code, namespace)
        enqueue(namespace["psycopg_engine"], queue, Noop(), Noop())
        assert namespace["worker"].run_until_idle() == 2
        with namespace["psycopg2_engine"].connect() as conn:
            assert conn.execute(sa.select(sa.func.count()).select_from(queue.models.jobs_table)).scalar_one() == 2

        async def through_asyncpg() -> int:
            try:
                async with namespace["asyncpg_engine"].connect() as conn:
                    for _ in range(3):
                        await conn.execute(sa.select(sa.func.count()).select_from(queue.models.jobs_table))
                    return int((await conn.execute(sa.select(sa.literal(1)))).scalar_one())
            finally:
                await namespace["asyncpg_engine"].dispose()  # on the loop its connections belong to

        assert asyncio.run(through_asyncpg()) == 1
    finally:
        for name in ("psycopg2_engine", "psycopg_engine"):
            if name in namespace:
                namespace[name].dispose()
