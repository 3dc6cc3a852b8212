"""Defect 11: a worker on an unmigrated (or older) schema raises SchemaNotMigrated promptly."""

from __future__ import annotations

import os
import threading
from typing import Any

import pytest
import sqlalchemy as sa
from support.probes import Background

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
