"""Dogfood: a FastAPI endpoint and a Flask view tested as their users would, each rolled back.

Each test asserts the job was enqueued, drains it, sees the handler's
effect, and (``no_rows_left``) finds no row anywhere afterwards.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.orm import Session, scoped_session, sessionmaker
from support.notes import NOTES, notes

from venturi_sa import Queue
from venturi_sa.testing import assert_enqueued, drain, refute_enqueued


def test_fastapi_endpoint(no_rows_left: None, venturi_queue_session: Session, venturi_queue: Queue,
                          venturi_drain: Any) -> None:
    fastapi = pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    app = fastapi.FastAPI()
    queue = venturi_queue

    def get_session() -> Iterator[Session]:  # the application's dependency; the test overrides it
        raise AssertionError("overridden in tests")

    session_dependency = fastapi.Depends(get_session)

    @app.post("/notes/{body}")
    def create(body: str, session: Session = session_dependency) -> dict[str, str]:
        job = queue.enqueue(session, queue.registry.get("note")(body=body))
        session.commit()  # the endpoint commits: in the test this releases a savepoint
        return {"job": job.id}

    app.dependency_overrides[get_session] = lambda: venturi_queue_session
    with TestClient(app) as client:
        job_id = client.post("/notes/from-fastapi").json()["job"]
    (job,) = assert_enqueued(venturi_queue_session, queue, "note", payload={"body": "from-fastapi"})
    assert job.id == job_id
    assert venturi_drain().completed == 1
    assert notes(venturi_queue_session) == ["from-fastapi"]
    refute_enqueued(venturi_queue_session, queue)


@pytest.fixture
def flask_app(engine: sa.Engine, venturi_queue: Queue) -> Iterator[tuple[Any, Any]]:
    flask = pytest.importorskip("flask")
    flask_sqlalchemy = pytest.importorskip("flask_sqlalchemy")
    app = flask.Flask(__name__)
    app.config["SQLALCHEMY_DATABASE_URI"] = engine.url.render_as_string(hide_password=False)
    db = flask_sqlalchemy.SQLAlchemy(app)
    queue = venturi_queue

    @app.post("/notes/<body>")
    def create(body: str) -> dict[str, str]:
        job = queue.enqueue(db.session, queue.registry.get("note")(body=body))
        db.session.commit()
        return {"job": job.id}

    yield app, db
    with app.app_context():
        db.engine.dispose()


@pytest.fixture
def flask_db_session(flask_app: tuple[Any, Any]) -> Iterator[Any]:
    """The recipe of docs/testing.md: ``db.session`` joins a per-test transaction that is rolled back."""
    app, db = flask_app
    with app.app_context():
        connection = db.engine.connect()
        outer = connection.begin()
        original = db.session
        db.session = scoped_session(sessionmaker(bind=connection, join_transaction_mode="create_savepoint"))
        try:
            yield db.session
        finally:
            db.session.remove()
            db.session = original
            outer.rollback()
            connection.close()


def test_flask_view(no_rows_left: None, flask_app: tuple[Any, Any], flask_db_session: Any,
                    venturi_queue: Queue) -> None:
    app, db = flask_app
    response = app.test_client().post("/notes/from-flask")
    assert response.status_code == 200
    assert_enqueued(db.session, venturi_queue, "note", payload={"body": "from-flask"})
    assert drain(db.session, venturi_queue).completed == 1
    assert notes(db.session) == ["from-flask"]
    assert db.session.execute(sa.select(sa.func.count()).select_from(NOTES)).scalar_one() == 1


def test_async_session(no_rows_left: None, pg_url: str, venturi_queue: Queue) -> None:
    pytest.importorskip("asyncpg")
    pytest.importorskip("greenlet")
    import asyncio

    from sqlalchemy.ext.asyncio import create_async_engine

    from venturi_sa.testing import (
        assert_enqueued_async,
        clock_async,
        drain_async,
        refute_enqueued_async,
        rolled_back_async_session,
    )

    url = sa.make_url(pg_url).set(drivername="postgresql+asyncpg")
    queue = venturi_queue

    async def scenario() -> None:
        engine = create_async_engine(url)
        try:
            async with rolled_back_async_session(engine) as session:
                clock = clock_async(session)
                await clock.freeze()
                await session.run_sync(lambda s: queue.enqueue(s, queue.registry.get("flaky")()))
                await assert_enqueued_async(session, queue, "flaky")
                assert (await drain_async(session, queue, fail_fast=False)).retried == 1
                await clock.advance(timedelta(minutes=10))
                assert (await drain_async(session, queue)).completed == 1
                await refute_enqueued_async(session, queue)
                assert await session.run_sync(notes) == ["flaky done"]
        finally:
            await engine.dispose()

    asyncio.run(scenario())

