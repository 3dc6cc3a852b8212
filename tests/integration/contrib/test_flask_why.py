"""Issue 40, item 3: ``jobs why`` and ``limits list`` tell one truth on every face (flask, venturi, the API).

The app (``support/apps/why_flask.py``) declares ``key_concurrency = 1`` on
``mail_user`` and ``global_concurrency = 2`` on ``zip_and_mail``.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import pytest
import sqlalchemy as sa
from support.cli import invoke, plain_url
from support.why_jobs import fan_in, key_limited

pytest.importorskip("flask_sqlalchemy")
pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def app(pg_url: str, models: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("ADOPTION_PREFIX", models.prefix)
    monkeypatch.setenv("ADOPTION_URL", pg_url)
    for name in ("VENTURI_DSN", "VENTURI_PREFIX"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delitem(sys.modules, "why_flask", raising=False)
    import why_flask

    yield why_flask.create_app()
    sys.modules.pop("why_flask", None)


def flask_venturi(app: Any, *args: str) -> str:
    result = app.test_cli_runner().invoke(args=["venturi", *args])
    assert result.exit_code == 0, result.output
    return str(result.output)


def venturi(*args: str, env: dict[str, str | None] | None = None) -> str:
    result = invoke(*args, env=env)
    assert result.exit_code == 0, result.output
    return str(result.stdout)


def test_a_key_limited_job_is_limited_on_every_face_with_the_app(app: Any, engine: sa.Engine, pg_url: str,
                                                                  models: Any) -> None:
    queue = app.extensions["venturi"].queue
    _, held = key_limited(engine, queue)
    truth = str(queue.explain(engine, held))
    assert "key_concurrency 1 of key 'user:1' is full: 1 claimed" in truth and "eligible now" not in truth
    assert flask_venturi(app, "jobs", "why", held).strip() == truth
    env = {"ADOPTION_PREFIX": models.prefix, "ADOPTION_URL": pg_url}
    with_app = venturi("jobs", "why", "--app", "why_flask:create_app", held, env=env)
    assert with_app.strip() == truth
    data = json.loads(flask_venturi(app, "jobs", "why", "--json", held))
    assert [r["code"] for r in data["reasons"]] == queue.explain(engine, held).codes


def test_without_the_app_declared_limits_are_unknown_never_eligible(app: Any, engine: sa.Engine, pg_url: str,
                                                                     models: Any) -> None:
    queue = app.extensions["venturi"].queue
    _, held = key_limited(engine, queue)
    bare = venturi("jobs", "why", "--dsn", plain_url(pg_url), "--prefix", models.prefix, held)
    assert "eligible now" not in bare and "declared limits unknown" in bare and "--app" in bare
    codes = json.loads(venturi("jobs", "why", "--json", "--dsn", plain_url(pg_url), "--prefix", models.prefix,
                               held))["reasons"]
    assert "limits_unknown" in [r["code"] for r in codes] and "eligible" not in [r["code"] for r in codes]
    queue.set_limit(engine, "mail_user", key_concurrency=1, actor="ops")  # an override is in the database
    bare = venturi("jobs", "why", "--dsn", plain_url(pg_url), "--prefix", models.prefix, held)
    assert "key_concurrency 1 of key 'user:1' is full: 1 claimed" in bare


def test_a_fan_in_waits_on_its_parents_not_on_a_worker(app: Any, engine: sa.Engine) -> None:
    queue = app.extensions["venturi"].queue
    child = fan_in(engine, queue)
    why = queue.explain(engine, child)
    assert why.codes == ["waiting_on_parents"], why
    out = flask_venturi(app, "jobs", "why", child)
    assert "waiting for 2 of 2 parents" in out and "is a worker running" not in out
    assert out.strip() == str(why)


def test_limits_list_shows_the_apps_declared_limits_and_overrides(app: Any, engine: sa.Engine, pg_url: str,
                                                                  models: Any) -> None:
    out = flask_venturi(app, "limits", "list")
    assert "no limits" not in out
    assert "mail_user" in out and "key_concurrency" in out and "zip_and_mail" in out and "declared" in out
    app.extensions["venturi"].queue.set_limit(engine, "zip_and_mail", global_concurrency=5, actor="ops")
    listed = json.loads(flask_venturi(app, "limits", "list", "--json"))
    assert {(i["kind"], i["name"], i["value"], i["source"]) for i in listed} == {
        ("mail_user", "key_concurrency", 1, "declared"), ("zip_and_mail", "global_concurrency", 5, "override")}
    env = {"ADOPTION_PREFIX": models.prefix, "ADOPTION_URL": pg_url}
    assert "mail_user" in venturi("limits", "list", "--app", "why_flask:create_app", env=env)
