"""Quiet logs: checkpoints at DEBUG, a cancel in one INFO line, SQL parameters (payloads) never logged."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
from typing import Any

import pytest
import sqlalchemy as sa
from marshmallow import Schema, fields
from support.hooks import drain
from support.paths import APPS
from support.waiting import WAIT, Events
from support.workers import enqueue, running

from venturi_sa import JobContext, Queue, Task, Worker
from venturi_sa.cli.connect import HiddenSqlParameters, make_engine

SECRET = "s3cr3t-card-4242"


class Card(Schema):
    card = fields.String(required=True)


class Chunks(Task):
    KIND = "chunks"
    Payload = Card

    def run(self, ctx: JobContext) -> Any:
        ctx.progress(1, 2, "half")
        ctx.checkpoint(note="saved")
        return {"ok": True}


def above_debug(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.levelno > logging.DEBUG and r.name.startswith("venturi_sa")]


def test_checkpoints_log_at_debug(engine: sa.Engine, models: Any, caplog: pytest.LogCaptureFixture) -> None:
    queue = Queue(models, [Chunks])
    enqueue(engine, queue, Chunks(card=SECRET))
    with caplog.at_level(logging.DEBUG, logger="venturi_sa"):
        assert drain(queue, engine) == 1
    checkpoints = [r for r in caplog.records if "] checkpoint" in r.getMessage()]
    assert [r.getMessage().partition("] ")[2] for r in checkpoints] == ["checkpoint", "checkpoint: saved"]
    assert {r.levelno for r in checkpoints} == {logging.DEBUG}
    assert not [r for r in above_debug(caplog) if SECRET in r.getMessage()]


def test_a_cancelled_run_ends_with_one_info_line_and_no_traceback(
        engine: sa.Engine, models: Any, caplog: pytest.LogCaptureFixture) -> None:
    started = threading.Event()

    class Hold(Task):
        KIND = "hold"

        def run(self, ctx: JobContext) -> None:
            started.set()
            ctx.wait_cancelled(WAIT)
            ctx.raise_if_cancelled()  # as docs/tasks.md shows

    queue = Queue(models, [Hold])
    events = Events()
    with caplog.at_level(logging.INFO, logger="venturi_sa"), \
            running(Worker(queue, engine, concurrency=1, poll_interval=0.2, on_event=events)):
        [job_id] = enqueue(engine, queue, Hold())
        assert started.wait(WAIT)
        queue.cancel(engine, job_id, "not needed", actor="ops")
        events.wait_for("finished", job_id=job_id)
    about_it = [r for r in above_debug(caplog) if job_id in r.getMessage() or getattr(r, "job_id", None) == job_id]
    assert [(r.levelno, r.exc_info) for r in about_it] == [(logging.INFO, None)], [r.getMessage() for r in about_it]
    assert "cancelled by ops while running: not needed" in about_it[0].getMessage()


def test_sql_parameters_are_hidden_from_logs_and_errors(pg_url: str) -> None:
    engine = make_engine(sa.make_url(pg_url))
    try:
        with pytest.raises(sa.exc.DBAPIError) as err, engine.connect() as conn:
            conn.execute(sa.text("SELECT CAST(:card AS text), 1 / 0"), {"card": SECRET})
        assert SECRET not in str(err.value)  # a handler's failed statement, as its journal note shows it
    finally:
        engine.dispose()
    record = logging.LogRecord("sqlalchemy.engine.Engine", logging.INFO, __file__, 1, "[%s] %r",
                               ("generated in 0.1s", {"payload": SECRET}), None)
    assert HiddenSqlParameters().filter(record)
    assert record.getMessage() == "[generated in 0.1s] [SQL parameters hidden]"


def test_the_worker_commands_vv_log_shows_statements_without_parameters(engine: sa.Engine, sqlmodel_app: Any,
                                                                        pg_url: str) -> None:
    """adoption_sqlmodel.py's handler inserts ``hero 1`` and returns a result: both are parameters."""
    enqueue(engine, sqlmodel_app.queue, sqlmodel_app.queue.registry.get("count_heroes")())
    env = {**os.environ, "ADOPTION_PREFIX": sqlmodel_app.PREFIX, "ADOPTION_STOP": "1", "VENTURI_DSN": pg_url}
    try:
        done = subprocess.run([sys.executable, "-m", "venturi_sa", "worker", "adoption_sqlmodel:queue", "-vv",
                               "--poll-interval", "0.1"], cwd=APPS, env=env,
                              capture_output=True, text=True, timeout=60)
    finally:
        with engine.begin() as conn:
            conn.execute(sqlmodel_app.Hero.__table__.delete())
    assert done.returncode == 0, done.stderr[-3000:]
    assert "INSERT INTO" in done.stderr and "[SQL parameters hidden" in done.stderr, done.stderr[-3000:]
    assert "hero 1" not in done.stderr and "sqlmodel_session" not in done.stderr
