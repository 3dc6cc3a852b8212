"""``flask venturi <command>``: the ``venturi`` commands that act on a queue, on the app's engine and prefix."""

from __future__ import annotations

import json
import sys
from typing import Any

import pytest
import sqlalchemy as sa
from support.workers import enqueue

pytest.importorskip("flask_sqlalchemy")
pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def app(pg_url: str, models: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """``adoption_flask``'s app on this test's queue; VENTURI_* unset, so only the app names the queue."""
    monkeypatch.setenv("ADOPTION_PREFIX", models.prefix)
    monkeypatch.setenv("ADOPTION_URL", pg_url)
    for name in ("VENTURI_DSN", "VENTURI_PREFIX"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delitem(sys.modules, "adoption_flask", raising=False)
    import adoption_flask

    yield adoption_flask.create_app()
    sys.modules.pop("adoption_flask", None)


def flask_venturi(app: Any, *args: str) -> Any:
    return app.test_cli_runner().invoke(args=["venturi", *args])


def ok(result: Any) -> str:
    assert result.exit_code == 0, result.output
    assert "Traceback" not in result.output
    return str(result.output)


def test_every_queue_command_is_there_and_the_others_are_not(app: Any) -> None:
    out = ok(flask_venturi(app, "--help"))
    for name in ("worker", "stats", "jobs", "cleanup", "archive", "schedules", "pause", "resume", "pauses", "web",
                 "migrate"):
        assert f"\n  {name} " in out, name
    assert "quickstart" not in out and "\n  sql " not in out


def test_help_is_the_venturi_commands_own(app: Any) -> None:
    out = ok(flask_venturi(app, "web", "--help"))
    assert "Usage: flask venturi web [OPTIONS]" in out and "--read-only" in out
    assert "why" in ok(flask_venturi(app, "jobs", "--help"))


@pytest.mark.parametrize("command", [("worker",), ("stats",), ("jobs", "retry"), ("schedules", "run"), ("web",),
                                     ("migrate",), ("limits", "set")])
def test_help_leaves_out_the_options_the_app_gives(app: Any, command: tuple[str, ...]) -> None:
    out = ok(flask_venturi(app, *command, "--help"))
    options = ("--app APP", "--dsn URL", "--prefix TEXT")
    for option in (*options, "VENTURI_DSN", "VENTURI_PREFIX"):
        assert option not in out, (command, option)
    if command != ("worker",):  # the bare `venturi` command keeps them
        from support.cli import invoke

        bare = invoke(*command, "--help").output
        assert all(option in bare for option in options), bare


def test_the_options_the_app_gives_are_refused_and_their_variables_ignored(app: Any, models: Any,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    for typed in (["--dsn", "postgresql://elsewhere/db"], ["--prefix", "other"], ["--app", "x:app"]):
        result = flask_venturi(app, "stats", *typed)
        assert result.exit_code == 2 and f"flask venturi takes no {typed[0]}" in result.output, result.output
    monkeypatch.setenv("VENTURI_PREFIX", "other")
    monkeypatch.setenv("VENTURI_DSN", "postgresql://nobody@127.0.0.1:1/nowhere")
    assert f"queue {models.prefix!r}: already at" in ok(flask_venturi(app, "migrate"))


def test_pause_and_resume_act_on_the_apps_queue(app: Any, engine: sa.Engine, models: Any) -> None:
    ok(flask_venturi(app, "pause", "in_app", "--reason", "deploy"))
    with engine.connect() as conn:
        [row] = conn.execute(sa.select(models.pauses_table))
    assert (row.kind, row.reason, row.resumed_at) == ("in_app", "deploy", None)
    [listed] = json.loads(ok(flask_venturi(app, "pauses", "--json")))
    assert listed["kind"] == "in_app"
    ok(flask_venturi(app, "resume", "in_app"))
    assert json.loads(ok(flask_venturi(app, "pauses", "--json"))) == []


def test_jobs_why_explains_a_job_of_the_apps_queue(app: Any, engine: sa.Engine) -> None:
    queue = app.extensions["venturi"].queue
    [job_id] = enqueue(engine, queue, queue.registry.get("in_app")())
    ok(flask_venturi(app, "pause", "in_app", "--reason", "deploy"))
    out = ok(flask_venturi(app, "jobs", "why", job_id))
    assert job_id in out and "paus" in out


def test_schedules_and_migrate_use_the_apps_prefix(app: Any, models: Any) -> None:
    assert json.loads(ok(flask_venturi(app, "schedules", "--json"))) == []
    out = ok(flask_venturi(app, "migrate"))
    assert f"queue {models.prefix!r}: already at" in out


def test_jobs_retry_with_dependents_requeues_what_the_death_killed(app: Any, engine: sa.Engine,
                                                                  models: Any) -> None:
    queue = app.extensions["venturi"].queue
    [parent] = enqueue(engine, queue, queue.registry.get("in_app")())
    [child] = enqueue(engine, queue, queue.registry.get("in_app")(), after=[parent])
    queue.kill(engine, parent)
    assert "--with-dependents" in ok(flask_venturi(app, "jobs", "retry", "--help"))
    ok(flask_venturi(app, "jobs", "retry", parent, "--with-dependents"))
    assert [queue.get_job(engine, j).status for j in (parent, child)] == ["pending", "pending"]


def test_errors_are_the_venturi_commands_one_line(app: Any) -> None:
    result = flask_venturi(app, "jobs", "show", "01J00000000000000000000000")
    assert result.exit_code == 1, result.output
    assert "venturi: error: no job with id '01J00000000000000000000000'" in result.output
    assert "Traceback" not in result.output
    usage = flask_venturi(app, "pause", "in_app")
    assert usage.exit_code == 2 and "Missing option '--reason'" in usage.output, usage.output
