"""Read-only mode, CSRF and the authorize hook are enforced on the server, before anything changes."""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from starlette.requests import Request
from starlette.testclient import TestClient
from support.web import confirmed, csrf_of

from venturi_sa import Queue, Task
from venturi_sa.web import BUILTIN_ACTIONS, create_app


class Pending(Task):
    """The seeded pending jobs' task type, so a payload edit would pass validation if it were let through."""

    KIND = "k_pending"

    def run(self, ctx: Any) -> None:
        return None

TARGETS = {"requeue": "dead", "kill": "pending", "release": "claimed", "cancel": "claimed", "retry_now": "scheduled",
           "run_now": "scheduled", "set_priority": "pending", "run_later": "pending", "edit_payload": "pending",
           "send_signal": "pending"}
VALUES = {"priority": "0", "run_at": "1h", "payload": '{"n": 5}', "signal_name": "go", "signal_payload": "{}"}
QUEUE_OPERATIONS = [{"do": "pause_kind", "kind": "k_pending", "reason": "no"}, {"do": "pause_kind", "kind": "*"},
                    {"do": "resume_kind", "kind": "k_paused"}, {"do": "pause_schedule", "name": "hourly"},
                    {"do": "resume_schedule", "name": "paused-one"},
                    {"do": "run_schedule", "name": "hourly"}]
LIMIT_OPERATIONS = [{"do": "set_limit", "kind": "k_pending", "name": "global_concurrency", "value": "1"},
                    {"do": "clear_limit", "kind": "k_pending"}]


def _statuses(engine: sa.Engine, models: Any) -> list[tuple[Any, ...]]:
    """Every row's (id, status, priority, visible_at, payload, journal entries), the pauses, cancel
    requests, schedules, limit overrides and signals: what no refused request may change."""
    job, entry = models.jobs_table, models.journal_table
    n = sa.select(sa.func.count()).where(entry.c.job_id == job.c.id).scalar_subquery()
    with engine.connect() as conn:
        rows = [tuple(r) for r in conn.execute(sa.select(job.c.id, job.c.status, job.c.priority, job.c.visible_at,
                                                         job.c.payload, n).order_by(job.c.id))]
        overrides = models.Limits.Override.__table__
        for table in (models.pauses_table, models.cancels_table, models.schedules_table, overrides,
                      models.signals_table):
            rows += [tuple(r) for r in conn.execute(sa.select(table).order_by(*table.primary_key.columns))]
    return rows


@pytest.fixture
def queue_state(engine: sa.Engine, models: Any, seeded: dict[str, list[str]]) -> None:
    """A paused kind and two schedules (one paused) for the queue-level operations to be refused on."""
    from venturi_sa import task
    from venturi_sa.periodic import reconcile

    hourly: type[Task] = task("k_hourly")(lambda ctx: None)
    queue = Queue(models, [hourly])
    queue.schedule(hourly(), every=timedelta(hours=1), name="hourly")
    queue.schedule(hourly(), every=timedelta(hours=2), name="paused-one")
    reconcile(queue, engine)
    queue.pause_schedule(engine, "paused-one")
    queue.pause(engine, "k_paused", reason="kept", actor="ops")


def _every_action(seeded: dict[str, list[str]]) -> list[dict[str, Any]]:
    forms: list[dict[str, Any]] = []
    for action in BUILTIN_ACTIONS:
        state = TARGETS[action.name]
        values = {f: VALUES[f] for f in action.fields}
        forms.append({"do": f"{action.name}:selected", "ids": seeded[state][:1], **values})
        if action.bulk:
            forms.append({"do": f"{action.name}:matching", "kind": f"k_{state}", **values})
            forms.append({"do": f"{action.name}:matching", **values})
    return forms


def _post_all(client: TestClient, token: str | None, seeded: dict[str, list[str]]) -> list[Any]:
    """Every job action and every queue operation, each with ``token`` (None: no token field)."""
    extra = {"csrf": token} if token is not None else {}
    return ([client.post("/actions", data={**form, **extra}, follow_redirects=False)
             for form in _every_action(seeded)]
            + [client.post("/schedules", data={**form, **extra}, follow_redirects=False)
               for form in QUEUE_OPERATIONS]
            + [client.post("/limits", data={**form, **extra}, follow_redirects=False)
               for form in LIMIT_OPERATIONS])


def test_read_only_refuses_every_action_and_hides_the_buttons(engine: sa.Engine, models: Any,
                                                              seeded: dict[str, list[str]], queue_state: None) -> None:
    before = _statuses(engine, models)
    app = create_app(engine, models.prefix, read_only=True, listen=False, tasks=[Pending])
    with TestClient(app) as client:
        jobs = client.get("/jobs").text
        assert 'id="read-only"' in jobs and 'name="do"' not in jobs
        assert 'id="job-requeue"' not in client.get(f"/jobs/{seeded['dead'][0]}").text
        assert 'name="do"' not in client.get(f"/jobs/{seeded['pending'][0]}").text
        assert 'name="do"' not in client.get("/schedules").text
        for response in _post_all(client, csrf_of(jobs), seeded):
            assert response.status_code == 403, response.text
            assert "read-only" in response.text
    assert _statuses(engine, models) == before


@pytest.mark.parametrize("csrf", [None, "", "wrong-token-" + "x" * 30])
def test_actions_need_the_csrf_token(client: TestClient, engine: sa.Engine, models: Any,
                                     seeded: dict[str, list[str]], queue_state: None, csrf: str | None) -> None:
    client.get("/jobs")  # the cookie is set
    before = _statuses(engine, models)
    for response in _post_all(client, csrf, seeded):
        assert response.status_code == 403, response.text
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
                                                  seeded: dict[str, list[str]], queue_state: None) -> None:
    asked: list[tuple[str, list[str]]] = []

    async def authorize(request: Request, action: str, job_ids: Sequence[str]) -> bool:
        if action == "view":
            return True
        if request.method == "POST":  # what is acted on (a GET asks too, to draw only allowed buttons)
            asked.append((action, list(job_ids)))
        return action == "kill" and request.headers.get("x-role") == "admin"

    before = _statuses(engine, models)
    app = create_app(engine, models.prefix, authorize=authorize, listen=False, tasks=[Pending])
    with TestClient(app) as client:
        token = csrf_of(client.get("/jobs").text)
        refused = client.post("/actions", data={"csrf": token, "do": "requeue:selected", "ids": seeded["dead"]},
                              follow_redirects=False)
        assert refused.status_code == 403 and "not authorized to requeue" in refused.text
        refused = client.post("/actions", data={"csrf": token, "do": "kill:matching", "kind": "k_pending"},
                              follow_redirects=False)
        assert refused.status_code == 403
        for response in _post_all(client, token, seeded):
            assert response.status_code == 403 and "not authorized to" in response.text, response.text
        assert _statuses(engine, models) == before
        asked_first = client.post("/actions", data={"csrf": token, "do": "kill:matching", "kind": "k_pending"},
                                  headers={"x-role": "admin"}, follow_redirects=False)
        assert confirmed(client, asked_first, **{"x-role": "admin"}).status_code == 200
    assert asked[0] == ("requeue", seeded["dead"])
    assert ("set_priority", seeded["pending"][:1]) in asked and ("cancel", seeded["claimed"][:1]) in asked
    assert ("pause_kind", []) in asked and ("resume_schedule", []) in asked  # queue-level: no job ids
    assert ("set_limit", []) in asked and ("clear_limit", []) in asked
    assert sorted(asked[-1][1]) == sorted(seeded["pending"])  # "all matching": the batch's own ids
    assert {s for i, s, *_ in _statuses(engine, models) if i in seeded["pending"]} == {"dead"}


def test_the_redirect_after_an_action_stays_inside_the_dashboard(client: TestClient,
                                                                 seeded: dict[str, list[str]]) -> None:
    token = csrf_of(client.get("/jobs").text)
    for target in ("https://evil.example/", "//evil.example/x", "/\\evil", "javascript:alert(1)"):
        response = client.post("/actions", data={"csrf": token, "do": "requeue:selected", "ids": seeded["dead"],
                                                 "next": target}, follow_redirects=False)
        assert response.headers["location"].startswith("/jobs?msg="), target


def test_the_csrf_cookie_is_http_only_and_same_site(client: TestClient) -> None:
    cookie = client.get("/").headers["set-cookie"]
    assert "venturi_csrf=" in cookie and "HttpOnly" in cookie and "SameSite=strict" in cookie


def test_a_first_visit_gets_one_csrf_token_however_often_it_is_asked_for() -> None:
    """A page that draws a signed form before the layout asks twice; both must name the cookie's token."""
    from venturi_sa.web.security import csrf_token

    request = Request({"type": "http", "method": "GET", "path": "/", "headers": [], "query_string": b""})
    first = csrf_token(request, b"s" * 32)
    assert csrf_token(request, b"s" * 32) == first


def test_buttons_of_actions_authorize_refuses_are_not_drawn(engine: sa.Engine, models: Any,
                                                            seeded: dict[str, list[str]]) -> None:
    def only_view(request: Request, action: str, job_ids: Sequence[str]) -> bool:
        return action == "view" or (request.headers.get("x-role") == "killer" and action == "kill")

    app = create_app(engine, models.prefix, authorize=only_view, listen=False)
    pages = ("/jobs", f"/jobs/{seeded['pending'][0]}", f"/jobs/{seeded['dead'][0]}", "/schedules",
             "/fragment/schedules", "/limits")
    with TestClient(app) as client:
        for path in pages:  # a viewer: every page, not one button or form that would be refused
            response = client.get(path)
            assert response.status_code == 200
            assert not re.findall(r'name="do"|name="note"|id="pause-form"', response.text), path
        killer = client.get(f"/jobs/{seeded['pending'][0]}", headers={"x-role": "killer"}).text
        assert 'id="job-kill"' in killer and 'id="job-cancel"' not in killer and 'id="job-run_now"' not in killer
        listed = client.get("/jobs", headers={"x-role": "killer"}).text
        assert 'id="all-kill"' in listed and 'id="do-kill"' in listed and 'id="all-requeue"' not in listed
    app.state.dashboard.feed.close()
