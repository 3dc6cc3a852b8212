"""``venturi_sa.contrib.flask``: jobs run in the app context on ``db.engine``; ``flask venturi`` commands."""

from __future__ import annotations

import sys
from typing import Any

import pytest
import sqlalchemy as sa
from click.testing import CliRunner
from support.workers import enqueue

from venturi_sa.cli import cli

pytest.importorskip("flask_sqlalchemy")


@pytest.fixture
def flask_module(pg_url: str, models: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("ADOPTION_PREFIX", models.prefix)
    monkeypatch.setenv("ADOPTION_URL", pg_url)
    monkeypatch.delenv("VENTURI_DSN", raising=False)
    monkeypatch.delitem(sys.modules, "adoption_flask", raising=False)
    import adoption_flask

    yield adoption_flask
    sys.modules.pop("adoption_flask", None)


def _enqueue(engine: sa.Engine, app: Any) -> str:
    queue = app.extensions["venturi"].queue
    [job_id] = enqueue(engine, queue, queue.registry.get("in_app")())
    return job_id


def test_flask_venturi_worker_runs_jobs_in_the_app_context(engine: sa.Engine, flask_module: Any) -> None:
    app = flask_module.create_app()
    job_id = _enqueue(engine, app)
    result = app.test_cli_runner().invoke(args=["venturi", "worker", "--concurrency", "2"])
    assert result.exit_code == 0, result.output
    queue = app.extensions["venturi"].queue
    assert queue.result(engine, job_id) == {"app": "adoption_flask", "g": "g works", "engine_is_db_engine": True}
    listed = app.test_cli_runner().invoke(args=["venturi", "jobs", "list"])
    assert listed.exit_code == 0 and job_id in listed.output and "completed" in listed.output, listed.output
    stats = app.test_cli_runner().invoke(args=["venturi", "stats", "--json"])
    assert stats.exit_code == 0 and '"in_app"' in stats.output, stats.output


def test_venturi_worker_takes_a_flask_factory(engine: sa.Engine, flask_module: Any) -> None:
    app = flask_module.create_app()
    job_id = _enqueue(engine, app)
    result = CliRunner().invoke(cli, ["worker", "adoption_flask:create_app"], env={"VENTURI_DSN": None})
    assert result.exit_code == 0, result.output
    assert app.extensions["venturi"].queue.result(engine, job_id)["app"] == "adoption_flask"


def test_the_extension_refuses_what_is_not_a_queue(flask_module: Any) -> None:
    from venturi_sa.contrib.flask import Venturi

    with pytest.raises(TypeError, match="takes a venturi_sa.Queue"):
        Venturi(db=object(), queue="jobs")  # type: ignore[arg-type]


@pytest.mark.parametrize("held", [False, True], ids=["request_context", "app_context_held"])
def test_a_request_that_raises_after_an_enqueue_leaves_nothing(pg_url: str, models: Any, engine: sa.Engine,
                                                                held: bool) -> None:
    """The extension rolls ``db.session`` back when a request ends in an exception, also when an app context
    outlives the request (a test's ``with app.app_context()``, where Flask-SQLAlchemy's teardown waits)."""
    from contextlib import nullcontext

    from flask import Flask
    from flask_sqlalchemy import SQLAlchemy

    from venturi_sa import JobContext, Queue, Task
    from venturi_sa.contrib.flask import Venturi

    class Mail(Task):
        KIND = "mail"

        def run(self, ctx: JobContext) -> None:
            pass

    app = Flask("rollback")
    app.config["SQLALCHEMY_DATABASE_URI"] = pg_url
    db = SQLAlchemy(app)
    queue = Queue(models, [Mail])
    venturi = Venturi(app, db, queue)

    @app.post("/fails")
    def fails() -> Any:
        venturi.enqueue(Mail())
        raise RuntimeError("after the enqueue")

    @app.post("/works")
    def works() -> Any:
        job = venturi.enqueue(Mail())
        db.session.commit()
        return {"job": job.id}

    client = app.test_client()
    with app.app_context() if held else nullcontext():
        assert client.post("/fails").status_code == 500
        answer = client.post("/works")
        assert answer.status_code == 200, answer.get_data(as_text=True)
    with engine.connect() as conn:
        ids = conn.scalars(sa.select(models.jobs_table.c.id)).all()
    assert ids == [answer.get_json()["job"]]  # the failed request's job is not there
    with app.app_context():
        db.engine.dispose()
