"""``Queue(session_class=...)``: the class of ``ctx.session`` under the CLI worker, WorkerApp and the test helpers."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.orm import Session
from support.paths import APPS
from support.workers import enqueue

from venturi_sa import Queue, Worker, WorkerApp, make_models
from venturi_sa.testing import drain, perform, rolled_back_session

sqlmodel = pytest.importorskip("sqlmodel")
HERE = APPS


class Subclass(Session):
    pass


def test_the_default_follows_the_models_and_can_be_told(models: Any) -> None:
    assert Queue(models).session_class is Session
    assert Queue(make_models(models.prefix, sqlmodel.SQLModel)).session_class is sqlmodel.Session
    assert Queue(models, session_class=Subclass).session_class is Subclass


def test_the_worker_takes_the_queues_class_unless_told(engine: sa.Engine, models: Any) -> None:
    queue = Queue(models, session_class=Subclass)
    assert Worker(queue, engine).session_class is Subclass
    assert WorkerApp(queue).worker(engine).session_class is Subclass
    assert Worker(queue, engine, session_class=Session).session_class is Session


def test_the_flask_extensions_worker_takes_the_queues_class(pg_url: str, models: Any) -> None:
    pytest.importorskip("flask_sqlalchemy")
    from flask import Flask
    from flask_sqlalchemy import SQLAlchemy

    from venturi_sa.contrib.flask import Venturi

    app = Flask("session_class")
    app.config["SQLALCHEMY_DATABASE_URI"] = pg_url
    db = SQLAlchemy(app)
    venturi = Venturi(app, db, Queue(models, session_class=Subclass))
    worker = venturi.worker(app)
    try:
        assert worker.session_class is Subclass
    finally:
        with app.app_context():
            db.engine.dispose()


def test_the_cli_worker_hands_sqlmodel_handlers_an_sqlmodel_session(engine: sa.Engine, sqlmodel_app: Any,
                                                                     pg_url: str) -> None:
    [job_id] = enqueue(engine, sqlmodel_app.queue, sqlmodel_app.queue.registry.get("count_heroes")())
    env = {**os.environ, "ADOPTION_PREFIX": sqlmodel_app.PREFIX, "ADOPTION_STOP": "1", "VENTURI_DSN": pg_url}
    done = subprocess.run([sys.executable, "-m", "venturi_sa", "worker", "adoption_sqlmodel:queue",
                           "--poll-interval", "0.1"], cwd=HERE, env=env, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr[-3000:]
    assert sqlmodel_app.queue.result(engine, job_id) == {"names": [], "sqlmodel_session": True}
    with engine.begin() as conn:  # the worker committed its hero; the next test starts with none
        conn.execute(sqlmodel_app.Hero.__table__.delete())


def test_the_cli_worker_hands_async_sqlmodel_handlers_an_sqlmodel_async_session(
        engine: sa.Engine, sqlmodel_app: Any, pg_url: str) -> None:
    pytest.importorskip("greenlet")
    [job_id] = enqueue(engine, sqlmodel_app.queue, sqlmodel_app.queue.registry.get("count_heroes_async")())
    env = {**os.environ, "ADOPTION_PREFIX": sqlmodel_app.PREFIX, "ADOPTION_STOP": "1", "VENTURI_DSN": pg_url}
    done = subprocess.run([sys.executable, "-m", "venturi_sa", "worker", "adoption_sqlmodel:queue",
                           "--poll-interval", "0.1"], cwd=HERE, env=env, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr[-3000:]
    # was a retry: a plain AsyncSession has no .exec
    assert sqlmodel_app.queue.result(engine, job_id) == {"names": [], "sqlmodel_session": True}
    with engine.begin() as conn:
        conn.execute(sqlmodel_app.Hero.__table__.delete())


def test_drain_gives_a_plain_test_session_handler_the_queues_class(engine: sa.Engine, sqlmodel_app: Any) -> None:
    task = sqlmodel_app.queue.registry.get("count_heroes")
    with rolled_back_session(engine) as session:  # a plain Session, as a suite may have
        session.add(sqlmodel_app.Hero(name="ada"))
        sqlmodel_app.queue.enqueue(session, task())
        result = drain(session, sqlmodel_app.queue)
        assert result.completed == 1
        names = session.scalars(sa.select(sqlmodel_app.Hero.name).order_by(sqlmodel_app.Hero.name)).all()
        assert names == ["ada", "hero 2"]  # the handler's write, in the test's transaction
        done = perform(task(), queue=sqlmodel_app.queue, session=session)
        assert done.attachment == {"names": ["ada", "hero 2"], "sqlmodel_session": True}
    with engine.connect() as conn:  # all of it rolled back
        assert conn.execute(sa.select(sa.func.count()).select_from(sqlmodel_app.Hero.__table__)).scalar_one() == 0
