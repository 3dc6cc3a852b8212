"""venturi's refusals as HTTP answers: ``contrib.flask.register_error_handlers`` and ``contrib.starlette``'s
``exception_handlers`` turn ``SignalConflict``/``InvalidTransition`` into 409 and ``JobNotFound`` into 404 (not
500), through a real Flask test client and a real FastAPI ``TestClient``."""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa
from support.workers import enqueue

from venturi_sa import JobContext, Queue, Task

pytestmark = pytest.mark.timeout(60)
UNKNOWN = "01J00000000000000000000000"


class Approval(Task):
    KIND = "approval"

    def run(self, ctx: JobContext) -> Any:
        return ctx.wait_for("approved")


def check_answers(client: Any, job_id: str) -> None:
    """The same requests, whatever the framework: ``client`` answers with ``.status_code`` and ``.json()``."""
    assert client.post(f"/jobs/{job_id}/signals/approved?by=ann").status_code == 200
    conflict = client.post(f"/jobs/{job_id}/signals/approved?by=bob")
    assert conflict.status_code == 409, conflict.text
    assert conflict.json()["error"] == "SignalConflict" and "another payload" in conflict.json()["detail"]
    retried = client.post(f"/jobs/{job_id}/retry")  # a pending job: requeue applies only to dead jobs
    assert (retried.status_code, retried.json()["error"]) == (409, "InvalidTransition")
    missing = client.get(f"/jobs/{UNKNOWN}")
    assert (missing.status_code, missing.json()["error"]) == (404, "JobNotFound")
    assert client.get(f"/jobs/{job_id}").json() == {"status": "pending"}


def test_flask_error_handlers_answer_409_and_404(pg_url: str, models: Any, engine: sa.Engine) -> None:
    pytest.importorskip("flask_sqlalchemy")
    from flask import Flask, request
    from flask_sqlalchemy import SQLAlchemy

    from venturi_sa.contrib.flask import Venturi, register_error_handlers

    app = Flask("refusals")
    app.config["SQLALCHEMY_DATABASE_URI"] = pg_url
    db = SQLAlchemy(app)
    queue = Queue(models, [Approval])
    venturi = Venturi(app, db, queue)
    register_error_handlers(app)

    @app.post("/jobs/<job_id>/follow-up")
    def follow_up(job_id: str) -> Any:  # enqueues, then is refused: the answered error rolls db.session back
        venturi.enqueue(Approval())
        return {"result": queue.signal(db.engine, job_id, "approved", {"by": "carl"}).result}

    @app.post("/commit")
    def commit() -> Any:
        db.session.commit()
        return {}

    @app.post("/jobs/<job_id>/signals/<name>")
    def signal(job_id: str, name: str) -> Any:
        return {"result": queue.signal(db.engine, job_id, name, {"by": request.args["by"]}).result}

    @app.post("/jobs/<job_id>/retry")
    def retry(job_id: str) -> Any:
        return {"status": queue.requeue(db.engine, job_id).status}

    @app.get("/jobs/<job_id>")
    def show(job_id: str) -> Any:
        return {"status": queue.get_job(db.engine, job_id).status}

    [job_id] = enqueue(engine, queue, Approval())
    client = app.test_client()
    check_answers(_Flask(client), job_id)
    with app.app_context():  # held across the requests: Flask-SQLAlchemy's own teardown waits
        assert client.post(f"/jobs/{job_id}/follow-up").status_code == 409
        assert client.post("/commit").status_code == 200
    with engine.connect() as conn:
        assert conn.scalars(sa.select(models.jobs_table.c.id)).all() == [job_id]
    with app.app_context():
        db.engine.dispose()


class _Flask:
    """Flask's test client with ``json()`` as a method, as Starlette's responses have it."""

    def __init__(self, client: Any) -> None:
        self.client = client

    def post(self, url: str, **options: Any) -> Any:
        return _Answer(self.client.post(url, **options))

    def get(self, url: str) -> Any:
        return _Answer(self.client.get(url))


class _Answer:
    def __init__(self, response: Any) -> None:
        self.status_code = response.status_code
        self.text = response.get_data(as_text=True)
        self._json = response.get_json()

    def json(self) -> Any:
        return self._json


def test_fastapi_exception_handlers_answer_409_and_404(models: Any, engine: sa.Engine) -> None:
    pytest.importorskip("fastapi")
    from fastapi import FastAPI
    from fastapi.testclient import TestClient

    from venturi_sa.contrib.starlette import exception_handlers

    queue = Queue(models, [Approval])
    api = FastAPI(exception_handlers=exception_handlers())

    @api.post("/jobs/{job_id}/signals/{name}")
    def signal(job_id: str, name: str, by: str) -> Any:
        return {"result": queue.signal(engine, job_id, name, {"by": by}).result}

    @api.post("/jobs/{job_id}/retry")
    def retry(job_id: str) -> Any:
        return {"status": queue.requeue(engine, job_id).status}

    @api.get("/jobs/{job_id}")
    def show(job_id: str) -> Any:
        return {"status": queue.get_job(engine, job_id).status}

    [job_id] = enqueue(engine, queue, Approval())
    with TestClient(api, raise_server_exceptions=False) as client:
        check_answers(client, job_id)
