"""Read-only mode, CSRF and the authorize hook are enforced on the server, before anything changes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
import sqlalchemy as sa
from starlette.requests import Request
from starlette.testclient import TestClient
from web_kit import csrf_of

from venturi_sa.web import BUILTIN_ACTIONS, create_app

TARGETS = {"requeue": "dead", "kill": "pending", "release": "claimed"}


def _statuses(engine: sa.Engine, models: Any) -> list[tuple[str, str, int]]:
    """Every row's (id, status, journal entries): what no refused request may change."""
    job, entry = models.jobs_table, models.journal_table
    n = sa.select(sa.func.count()).where(entry.c.job_id == job.c.id).scalar_subquery()
    with engine.connect() as conn:
        return [tuple(r) for r in conn.execute(sa.select(job.c.id, job.c.status, n).order_by(job.c.id))]


def _every_action(seeded: dict[str, list[str]]) -> list[dict[str, Any]]:
    forms: list[dict[str, Any]] = []
    for action in BUILTIN_ACTIONS:
        state = TARGETS[action.name]
        forms.append({"do": f"{action.name}:selected", "ids": seeded[state]})
        forms.append({"do": f"{action.name}:matching", "status": state})
        forms.append({"do": f"{action.name}:matching"})
    return forms


def test_read_only_refuses_every_action_and_hides_the_buttons(engine: sa.Engine, models: Any,
                                                              seeded: dict[str, list[str]]) -> None:
    before = _statuses(engine, models)
    app = create_app(engine, models.prefix, read_only=True, listen=False)
    with TestClient(app) as client:
        jobs = client.get("/jobs").text
        assert 'id="read-only"' in jobs and 'name="do"' not in jobs
        assert 'id="job-requeue"' not in client.get(f"/jobs/{seeded['dead'][0]}").text
        token = csrf_of(jobs)
        for form in _every_action(seeded):
            response = client.post("/actions", data={"csrf": token, **form}, follow_redirects=False)
            assert response.status_code == 403, form
            assert "read-only" in response.text
    assert _statuses(engine, models) == before


@pytest.mark.parametrize("csrf", [None, "", "wrong-token-" + "x" * 30])
def test_actions_need_the_csrf_token(client: TestClient, engine: sa.Engine, models: Any,
                                     seeded: dict[str, list[str]], csrf: str | None) -> None:
    client.get("/jobs")  # the cookie is set
    before = _statuses(engine, models)
    for form in _every_action(seeded):
        data = {**form, **({"csrf": csrf} if csrf is not None else {})}
        response = client.post("/actions", data=data, follow_redirects=False)
        assert response.status_code == 403, form
        assert "CSRF" in response.text
    assert _statuses(engine, models) == before


def test_a_token_without_its_cookie_and_cross_origin_posts_are_refused(
        engine: sa.Engine, models: Any, seeded: dict[str, list[str]]) -> None:
    before = _statuses(engine, models)
    app = create_app(engine, models.prefix, listen=False)
    with TestClient(app) as client:
        token = csrf_of(client.get("/jobs").text)
        form = {"csrf": token, "do": "requeue:selected", "ids": seeded["dead"]}
        crossed = client.post("/actions", data=form, headers={"Origin": "https://evil.example"},
                              follow_redirects=False)
        assert crossed.status_code == 403 and "cross-origin" in crossed.text
        client.cookies.clear()
        assert client.post("/actions", data=form, follow_redirects=False).status_code == 403
    assert _statuses(engine, models) == before


def test_authorize_decides_per_action_and_job_ids(engine: sa.Engine, models: Any,
                                                  seeded: dict[str, list[str]]) -> None:
    asked: list[tuple[str, list[str]]] = []

    async def authorize(request: Request, action: str, job_ids: Sequence[str]) -> bool:
        asked.append((action, list(job_ids)))
        return action == "kill" and request.headers.get("x-role") == "admin"

    before = _statuses(engine, models)
    app = create_app(engine, models.prefix, authorize=authorize, listen=False)
    with TestClient(app) as client:
        token = csrf_of(client.get("/jobs").text)
        refused = client.post("/actions", data={"csrf": token, "do": "requeue:selected", "ids": seeded["dead"]},
                              follow_redirects=False)
        assert refused.status_code == 403 and "not authorized to requeue" in refused.text
        refused = client.post("/actions", data={"csrf": token, "do": "kill:matching", "kind": "k_pending"},
                              follow_redirects=False)
        assert refused.status_code == 403
        assert _statuses(engine, models) == before
        allowed = client.post("/actions", data={"csrf": token, "do": "kill:matching", "kind": "k_pending"},
                              headers={"x-role": "admin"}, follow_redirects=False)
        assert allowed.status_code == 303
    assert asked[0] == ("requeue", seeded["dead"])
    assert sorted(asked[-1][1]) == sorted(seeded["pending"])  # "all matching": the batch's own ids
    assert {s for i, s, _ in _statuses(engine, models) if i in seeded["pending"]} == {"dead"}


def test_the_redirect_after_an_action_stays_inside_the_dashboard(client: TestClient,
                                                                 seeded: dict[str, list[str]]) -> None:
    token = csrf_of(client.get("/jobs").text)
    for target in ("https://evil.example/", "//evil.example/x", "/\\evil", "javascript:alert(1)"):
        response = client.post("/actions", data={"csrf": token, "do": "kill:selected", "ids": seeded["pending"],
                                                 "next": target}, follow_redirects=False)
        assert response.headers["location"].startswith("/jobs?msg="), target


def test_the_csrf_cookie_is_http_only_and_same_site(client: TestClient) -> None:
    cookie = client.get("/").headers["set-cookie"]
    assert "venturi_csrf=" in cookie and "HttpOnly" in cookie and "SameSite=strict" in cookie
