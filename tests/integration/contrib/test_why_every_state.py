"""Every state ``queue.explain`` names reads the same on every face: the API, ``venturi jobs why --app``,
``flask venturi jobs why`` and the dashboard's job page (issue 40, item 3)."""

from __future__ import annotations

import html
import sys
from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa
from starlette.testclient import TestClient
from support.cli import invoke
from support.why_jobs import jobs_in_every_state

from venturi_sa.web import create_app

pytest.importorskip("flask_sqlalchemy")
pytestmark = pytest.mark.timeout(90)


@pytest.fixture
def app(pg_url: str, models: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    monkeypatch.setenv("ADOPTION_PREFIX", models.prefix)
    monkeypatch.setenv("ADOPTION_URL", pg_url)
    for name in ("VENTURI_DSN", "VENTURI_PREFIX"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delitem(sys.modules, "why_flask", raising=False)
    import why_flask

    yield why_flask.create_app()
    sys.modules.pop("why_flask", None)


def test_each_state_reads_the_same_on_every_face(app: Any, engine: sa.Engine, pg_url: str, models: Any) -> None:
    queue = app.extensions["venturi"].queue
    env = {"ADOPTION_PREFIX": models.prefix, "ADOPTION_URL": pg_url}
    dashboard = create_app(engine, models.prefix, listen=False, tasks=queue.registry)
    try:
        with TestClient(dashboard) as client:
            for code, job_id in jobs_in_every_state(engine, queue).items():
                why = queue.explain(engine, job_id)
                assert why.codes[0] == code, why
                assert "eligible" not in why.codes and "no_worker" not in why.codes[:1], why
                flask_out = app.test_cli_runner().invoke(args=["venturi", "jobs", "why", job_id]).output
                assert flask_out.strip() == str(why), code
                cli_out = invoke("jobs", "why", "--app", "why_flask:create_app", job_id, env=env).stdout
                assert cli_out.strip() == str(why), code
                page = html.unescape(client.get(f"/jobs/{job_id}").text)
                if code != "dead":  # a finished job's page shows its journal, not explain's list
                    for reason in why.reasons:
                        assert f'data-code="{reason.code}"' in page and reason.text in page, (code, reason)
    finally:
        dashboard.state.dashboard.feed.close()
