"""Viewing is authorized, CSRF tokens are signed, pages refuse framing, confirmations bind their ids,
large JSON is cut, unchanged fragments are not re-sent, and ``venturi web`` checks Host and its token."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

import pytest
import sqlalchemy as sa
from starlette.requests import Request
from starlette.responses import HTMLResponse
from starlette.testclient import TestClient
from support.web import confirm_form, confirmed, csrf_of, factory_session, msg_of

from venturi_sa import Queue
from venturi_sa.web import Page, create_app
from venturi_sa.web.app import JSON_SHOWN
from venturi_sa.web.standalone import HostCheck, served_names

VIEWS = ["/", "/fragment/overview", "/jobs", "/fragment/jobs", "/workers", "/fragment/workers", "/schedules",
         "/fragment/schedules", "/events", "/extra"]


def _extra(request: Request, dashboard: Any) -> HTMLResponse:
    return HTMLResponse("extra page")


def test_view_is_asked_for_every_page_fragment_and_the_stream(engine: sa.Engine, models: Any,
                                                              seeded: dict[str, list[str]]) -> None:
    asked: list[tuple[str, list[str]]] = []

    def authorize(request: Request, action: str, job_ids: Sequence[str]) -> bool:
        asked.append((action, list(job_ids)))
        return request.headers.get("x-role") == "admin"

    job = seeded["dead"][0]
    app = create_app(engine, models.prefix, authorize=authorize, listen=False,
                     pages=[Page(path="/extra", title="Extra", endpoint=_extra)])
    with TestClient(app) as client:
        for path in [*VIEWS, f"/jobs/{job}", f"/fragment/jobs/{job}", f"/jobs/{job}/json/payload"]:
            refused = client.get(path)
            assert refused.status_code == 403, path
            assert "not authorized to view" in refused.text and "hunter2" not in refused.text
        assert ("view", [job]) in asked and ("view", []) in asked
        assert {a for a, _ in asked} == {"view"}
        for path in [p for p in VIEWS if p != "/events"] + [f"/jobs/{job}"]:
            assert client.get(path, headers={"x-role": "admin"}).status_code == 200, path
    app.state.dashboard.feed.close()


def test_a_csrf_token_must_be_signed_by_this_dashboard(engine: sa.Engine, models: Any,
                                                       seeded: dict[str, list[str]]) -> None:
    queue = Queue(models)
    form = {"do": "requeue:selected", "ids": seeded["dead"]}
    one = create_app(engine, models.prefix, listen=False, secret="s" * 32)
    other = create_app(engine, models.prefix, listen=False, secret="t" * 32)
    with TestClient(other) as elsewhere:
        foreign = csrf_of(elsewhere.get("/jobs").text)  # a valid token, of another secret
    with TestClient(one) as client:
        planted = "p" * 43 + ".0"  # an attacker-chosen cookie and the same token: equal, but unsigned
        for token in (foreign, planted):
            client.cookies.set("venturi_csrf", token)
            response = client.post("/actions", data={**form, "csrf": token}, follow_redirects=False)
            assert response.status_code == 403 and "CSRF" in response.text
        client.cookies.clear()
        token = csrf_of(client.get("/jobs").text)
        nulled = client.post("/actions", data={**form, "csrf": token}, headers={"Origin": "null"},
                             follow_redirects=False)
        assert nulled.status_code == 403 and "cross-origin request from null" in nulled.text
        assert {queue.get_job(engine, i).status for i in seeded["dead"]} == {"dead"}
        assert client.post("/actions", data={**form, "csrf": token}, follow_redirects=False).status_code == 303
    with TestClient(create_app(engine, models.prefix, listen=False, secret="s" * 32)) as again:
        again.cookies.set("venturi_csrf", token)  # a configured secret outlives the process
        response = again.post("/actions", data={**form, "csrf": token, "do": "kill:selected",
                                                "ids": seeded["pending"]}, follow_redirects=False)
        assert response.status_code == 200 and 'id="confirm-form"' in response.text


def test_over_https_the_cookie_is_host_prefixed_and_secure(engine: sa.Engine, models: Any) -> None:
    app = create_app(engine, models.prefix, listen=False)
    with TestClient(app, base_url="https://testserver") as client:
        cookie = client.get("/jobs").headers["set-cookie"]
        assert cookie.startswith("__Host-venturi_csrf=") and "Secure" in cookie and "Path=/;" in cookie
        assert "Domain" not in cookie
    with TestClient(app) as plain:
        assert "Secure" not in plain.get("/jobs").headers["set-cookie"]


def test_every_response_refuses_framing_and_scripts_from_elsewhere(client: TestClient,
                                                                   seeded: dict[str, list[str]]) -> None:
    for path in ("/", "/jobs", "/jobs/nosuch", "/static/dashboard.js", "/jobs?status=bogus"):
        headers = client.get(path).headers
        assert headers["x-frame-options"] == "DENY", path
        csp = headers["content-security-policy"]
        assert "frame-ancestors 'none'" in csp and "script-src 'self';" in csp and "unsafe-eval" not in csp
    page = client.get("/jobs").text
    assert not re.search(r"<script(?![^>]*\bsrc=)", page), "an inline script would be refused by the CSP"
    assert not re.search(r"\son[a-z]+=", page) and "hx-on" not in page and "js:" not in page


def test_a_confirmation_acts_only_on_its_own_ids(client: TestClient, engine: sa.Engine, models: Any,
                                                 seeded: dict[str, list[str]]) -> None:
    queue = Queue(models)
    token = csrf_of(client.get("/jobs").text)
    target, bystander = seeded["pending"]
    asked = client.post("/actions", data={"csrf": token, "do": "kill:selected", "ids": [target]})
    assert "Kill 1 job(s)?" in asked.text and queue.get_job(engine, target).status == "pending"
    fields = dict(confirm_form(asked.text))
    assert set(fields) == {"csrf", "do", "note", "selection"}
    text, _, mac = fields["selection"].rpartition(".")
    for altered in ({**fields, "selection": f"{text[:-2]}AA.{mac}"}, {**fields, "selection": f"{text}.{'0' * 64}"},
                    {**fields, "selection": ""}, {**fields, "note": "changed"}, {**fields, "do": "cancel:confirmed"}):
        response = client.post("/actions", data=altered, follow_redirects=False)
        assert response.status_code == 400 and "confirmation does not match" in response.text
    client.cookies.clear()  # another browser: its own CSRF token
    other = csrf_of(client.get("/jobs").text)
    response = client.post("/actions", data={**fields, "csrf": other}, follow_redirects=False)
    assert response.status_code == 400
    assert {queue.get_job(engine, i).status for i in seeded["pending"]} == {"pending"}
    fresh = client.post("/actions", data={"csrf": other, "do": "kill:selected", "ids": [target, "01NOSUCH"]})
    assert "Kill 1 job(s)?" in fresh.text and "are unknown or in another status" in fresh.text
    done = confirmed(client, fresh)
    assert msg_of(done.text).startswith("Kill: 1 job(s) changed; 1 refused: no job with id 01NOSUCH")
    rows = dict(re.findall(r'<tr data-id="([^"]+)">.*?<td class="wrap">([^<]*)</td>', done.text, re.DOTALL))
    assert rows == {target: "changed", "01NOSUCH": "refused: no job with id 01NOSUCH"}
    assert queue.get_job(engine, target).status == "dead" and queue.get_job(engine, bystander).status == "pending"


def test_all_matching_is_confirmed_with_its_count_kinds_and_filter(client: TestClient, engine: sa.Engine,
                                                                   models: Any, seeded: dict[str, list[str]]) -> None:
    queue = Queue(models)
    token = csrf_of(client.get("/jobs").text)
    asked = client.post("/actions", data={"csrf": token, "do": "cancel:matching", "status": "pending"})
    pending = seeded["pending"] + seeded["scheduled"]
    assert "Cancel 4 job(s)?" in asked.text
    assert "k_pending</span>: 2" in asked.text and "k_scheduled</span>: 2" in asked.text
    assert 'id="confirm-filter">Filter: <span class="mono">status=pending' in asked.text
    assert {queue.get_job(engine, i).status for i in pending} == {"pending"}
    assert not [k for k, _ in confirm_form(asked.text) if k == "ids"]  # one signed field, not one per id
    assert msg_of(confirmed(client, asked).text) == "Cancel: 4 job(s) changed"
    assert {queue.get_job(engine, i).status for i in pending} == {"dead"}


def test_large_json_is_cut_with_a_download_and_unchanged_fragments_are_not_resent(
        client: TestClient, engine: sa.Engine, models: Any) -> None:
    big = {"blob": "z" * (JSON_SHOWN * 3)}
    with factory_session(engine, models) as (Job, Entry):
        job_id = Job(pending=True, kind="k_big", payload=big).id
    page = client.get(f"/jobs/{job_id}").text
    assert len(page) < JSON_SHOWN * 2
    assert f'href="/jobs/{job_id}/json/payload" download' in page
    assert f"showing {JSON_SHOWN} of {len(json.dumps(big, indent=2))} characters" in page
    download = client.get(f"/jobs/{job_id}/json/payload")
    assert download.json() == big and "attachment" in download.headers["content-disposition"]
    assert client.get(f"/jobs/{job_id}/json/nothing").status_code == 404
    first = client.get(f"/fragment/jobs/{job_id}")
    tag = first.headers["etag"]
    again = client.get(f"/fragment/jobs/{job_id}", headers={"If-None-Match": tag})
    assert again.status_code == 204 and again.content == b""
    with engine.begin() as conn:
        conn.execute(sa.update(models.jobs_table).where(models.jobs_table.c.id == job_id).values(priority=2))
    changed = client.get(f"/fragment/jobs/{job_id}", headers={"If-None-Match": tag})
    assert changed.status_code == 200 and changed.headers["etag"] != tag


def _guarded(names: frozenset[str], token: str | None) -> TestClient:
    async def app(scope: Any, receive: Any, send: Any) -> None:
        await HTMLResponse("the dashboard")(scope, receive, send)

    return TestClient(HostCheck(app, names, token))


def test_the_standalone_server_answers_only_its_own_host_names() -> None:
    client = _guarded(served_names("127.0.0.1", ["dash.internal"]), None)
    for host in ("127.0.0.1:8787", "localhost:8787", "[::1]:8787", "dash.internal", "LOCALHOST"):
        assert client.get("/", headers={"host": host}).text == "the dashboard", host
    for host in ("rebind.example:8787", "127.0.0.1.nip.io", "", "evil.localhost"):
        response = client.get("/", headers={"host": host})
        assert response.status_code == 421 and "--allowed-host" in response.text, host


def test_a_non_loopback_server_asks_for_its_token_once() -> None:
    client = _guarded(served_names("10.1.2.3"), "s3cret-token")
    assert client.get("/jobs", headers={"host": "10.1.2.3:8787"}).status_code == 401
    assert client.get("/jobs?token=wrong", headers={"host": "10.1.2.3:8787"}).status_code == 401
    admitted = client.get("/jobs?token=s3cret-token&status=dead", headers={"host": "10.1.2.3:8787"},
                          follow_redirects=False)
    assert admitted.status_code == 303 and admitted.headers["location"] == "/jobs?status=dead"
    assert "venturi_access=s3cret-token" in admitted.headers["set-cookie"] and "HttpOnly" in admitted.headers[
        "set-cookie"]
    assert client.get("/jobs", headers={"host": "10.1.2.3:8787"}).text == "the dashboard"  # the cookie now
    assert client.get("/", headers={"host": "rebind.example"}).status_code == 421  # the Host check comes first


@pytest.mark.parametrize("bound", ["0.0.0.0", "::"])
def test_bound_to_every_interface_the_machine_name_counts(bound: str) -> None:
    import socket

    assert socket.gethostname().lower() in served_names(bound)
    assert "rebind.example" not in served_names(bound)
