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
