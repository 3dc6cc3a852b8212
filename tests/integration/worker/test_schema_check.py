"""Defect 11: a worker on an unmigrated (or older) schema raises SchemaNotMigrated promptly.

Defect 13: a transient error of the schema check is retried within the start-up wait.
"""

from __future__ import annotations

import os
import threading
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.orm import Session
from support.probes import Background
from support.waiting import WAIT, wait_until

import alembic_venturi
from venturi_sa import JobContext, Queue, Task, Worker, make_models
from venturi_sa.errors import SchemaNotMigrated

_n = iter(range(10**6))


class Ping(Task):
    KIND = "ping"

    def run(self, ctx: JobContext) -> None:
        pass


def unmigrated_queue(engine: sa.Engine, revision: str | None) -> Queue:
    prefix = f"hs{os.getpid()}_{next(_n)}"
    if revision is not None:
        alembic_venturi.upgrade(engine, prefix, revision)
    return Queue(make_models(prefix), [Ping])


# Regression test of defect 11 (worker hardening issue): failed on e53c386.
@pytest.mark.parametrize("revision", [None, "v2"], ids=["no-tables", "older-revision"])
def test_run_until_idle_raises_schema_not_migrated(engine: sa.Engine, revision: str | None) -> None:
    queue = unmigrated_queue(engine, revision)
    worker = Worker(queue, engine, poll_interval=0.2, listen=False)
    result: list[Any] = []
    thread = threading.Thread(target=lambda: result.append(_call(worker.run_until_idle)), daemon=True)
    thread.start()
    thread.join(10)
    if thread.is_alive():
        worker.stop(now=True)
        thread.join(10)
        pytest.fail("run_until_idle() did not return within 10 s")
    [outcome] = result
    assert isinstance(outcome, SchemaNotMigrated), f"run_until_idle() returned {outcome!r}"


# Regression test of defect 11 (worker hardening issue): failed on e53c386.
@pytest.mark.parametrize("revision", [None, "v2"], ids=["no-tables", "older-revision"])
def test_run_raises_schema_not_migrated(engine: sa.Engine, revision: str | None) -> None:
    queue = unmigrated_queue(engine, revision)
    worker = Worker(queue, engine, poll_interval=0.2, listen=False)
    bg = Background(worker).start()
    bg.thread.join(10)
    if bg.thread.is_alive():
        bg.stop(now=True)
        pytest.fail("run() on an unmigrated queue was still running after 10 s")
    assert bg.errors and isinstance(bg.errors[0], SchemaNotMigrated), f"run() ended with {bg.errors!r}"


def _call(fn: Any) -> Any:
    try:
        return fn()
    except BaseException as exc:  # noqa: BLE001 - the test inspects it
        return exc


# Defect 13: only an unavailable server was waited for at start; any other transient error of the schema
# check (here a lock timeout) ended run() at once.
def test_a_transient_error_of_the_schema_check_is_retried(engine: sa.Engine, models: Any,
                                                          caplog: pytest.LogCaptureFixture) -> None:
    queue = Queue(models, [Ping])
    with Session(engine) as session, session.begin():
        job_id = queue.enqueue(session, Ping()).id
    timing_out = sa.create_engine(engine.url, connect_args={"options": "-c timezone=UTC -c lock_timeout=100"})
    holder = engine.connect()
    holder.begin()
    holder.exec_driver_sql(f"LOCK TABLE {models.names.version_table} IN ACCESS EXCLUSIVE MODE")
    bg = Background(Worker(queue, timing_out, poll_interval=0.2, listen=False)).start()
    try:
        wait_until(lambda: not bg.thread.is_alive() or any(
            "transient database error at start" in r.getMessage() for r in caplog.records), WAIT,
            "the worker to log that its schema check is retried, or to end")
        assert not bg.errors, f"run() ended with {bg.errors!r}"
        assert queue.get_job(engine, job_id).status == "pending"  # not started: still in the schema check
        holder.rollback()
        wait_until(lambda: queue.get_job(engine, job_id).status == "completed", WAIT, "the job to be run")
    finally:
        holder.close()
        if bg.thread.is_alive():
            bg.stop()
        timing_out.dispose()
    assert not bg.errors, f"run() ended with {bg.errors!r}"
    [line] = [r.getMessage() for r in caplog.records if "at start" in r.getMessage()]
    assert "lock timeout" in line, line
