"""The Limits page: declared and overridden limits with their use; set and clear an override behind the
guard (read-only mode, CSRF, ``authorize``) and a signed confirmation (issue 40, item 3)."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import sqlalchemy as sa
from starlette.testclient import TestClient
from support.web import csrf_of

from venturi_sa import Queue
from venturi_sa.web import create_app

pytest.importorskip("flask_sqlalchemy")
ACTOR = "dashboard user at testclient"


@pytest.fixture
def queue(pg_url: str, models: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[Queue]:
    monkeypatch.setenv("ADOPTION_PREFIX", models.prefix)
    monkeypatch.setenv("ADOPTION_URL", pg_url)
    monkeypatch.delitem(sys.modules, "why_flask", raising=False)
    import why_flask

    yield why_flask.create_app().extensions["venturi"].queue
    sys.modules.pop("why_flask", None)


@pytest.fixture
def make_client(engine: sa.Engine, models: Any) -> Iterator[Any]:
    apps: list[Any] = []

    def make(**options: Any) -> TestClient:
        app = create_app(engine, models.prefix, listen=False, poll_interval=0.2, **options)
        apps.append(app)
        return TestClient(app)

    yield make
    for app in apps:
        app.state.dashboard.feed.close()


def _confirm_page(client: TestClient, **form: Any) -> Any:
    page = client.get("/limits").text
    token = csrf_of(page) if 'name="csrf"' in page else client.cookies.get("venturi_csrf")  # read-only: no form
    return client.post("/limits", data={"csrf": token, **form}, follow_redirects=False)


def _confirmed(client: TestClient, page: str) -> str:
    """Press the confirmation page's button; the message it redirects back to /limits with."""
    fields = dict(re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)">', page))
    response = client.post("/limits", data=fields, follow_redirects=False)
    assert response.status_code == 303, response.text
    location = urlsplit(response.headers["location"])
    assert location.path == "/limits"
    return parse_qs(location.query)["msg"][0]


def test_the_page_lists_declared_limits_and_overrides(engine: sa.Engine, queue: Queue, make_client: Any) -> None:
    page = make_client(tasks=queue.registry).get("/limits").text
    assert 'data-kind="mail_user" data-limit="key_concurrency"' in page and ">declared<" in page
    assert 'data-kind="zip_and_mail" data-limit="global_concurrency"' in page
    bare = make_client().get("/limits").text
    assert "no limit is declared or overridden" in bare and "only overrides are" in bare
    queue.set_limit(engine, "zip_and_mail", global_concurrency=5, actor="ops")
    assert ">override<" in make_client().get("/limits").text


def test_set_and_clear_are_confirmed_first_then_recorded_with_the_actor(engine: sa.Engine, queue: Queue,
                                                                        make_client: Any) -> None:
    client = make_client(tasks=queue.registry)
    asked = _confirm_page(client, do="set_limit", kind="mail_user", name="rate_limit", value="100/1m")
    assert asked.status_code == 200 and 'id="confirm-go"' in asked.text
    assert "Set rate_limit of kind mail_user to 100/1m" in asked.text
    assert [i.name for i in queue.limits(engine) if i.source == "override"] == []  # nothing yet
    assert _confirmed(client, asked.text) == "kind mail_user: rate_limit set to 100/1m"
    [override] = [i for i in queue.limits(engine) if i.source == "override"]
    assert (override.kind, override.name, str(override.value)) == ("mail_user", "rate_limit", "100/60s")
    with engine.connect() as conn:
        actors = conn.execute(sa.text(f"SELECT actor FROM {queue.prefix}_limit_log")).scalars().all()
    assert actors == [ACTOR]
    assert 'id="clear-mail_user-rate_limit"' in client.get("/limits").text
    asked = _confirm_page(client, do="clear_limit", kind="mail_user", name="rate_limit")
    assert _confirmed(client, asked.text) == "kind mail_user: cleared rate_limit"
    assert [i for i in queue.limits(engine) if i.source == "override"] == []


def test_refusals_and_forgeries_change_nothing(engine: sa.Engine, queue: Queue, make_client: Any) -> None:
    client = make_client(tasks=queue.registry)
    assert _confirm_page(client, do="set_limit", kind="k", name="rate_limit", value="lots").status_code == 400
    assert _confirm_page(client, do="set_limit", kind="k", name="nope", value="1").status_code == 400
    no_csrf = client.post("/limits", data={"do": "set_limit", "kind": "k", "name": "global_concurrency",
                                           "value": "1"}, follow_redirects=False)
    assert no_csrf.status_code == 403
    asked = _confirm_page(client, do="set_limit", kind="zip_and_mail", name="global_concurrency", value="3")
    fields = dict(re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)">', asked.text))
    forged = client.post("/limits", data={**fields, "selection": fields["selection"][:-4] + "0000"},
                         follow_redirects=False)
    assert forged.status_code == 400 and "confirmation" in forged.text
    swapped = client.post("/limits", data={**fields, "do": "clear_limit"}, follow_redirects=False)
    assert swapped.status_code == 400
    refused = _confirm_page(client, do="set_limit", kind="zip_and_mail", name="key_concurrency", value="1")
    assert "declares no limit_key" in _confirmed(client, refused.text)  # refused by set_limit: the message
    assert [i for i in queue.limits(engine) if i.source == "override"] == []
    read_only = make_client(tasks=queue.registry, read_only=True)
    assert 'id="do-set-limit"' not in read_only.get("/limits").text
    assert _confirm_page(read_only, do="set_limit", kind="k", name="global_concurrency",
                         value="1").status_code == 403

    def deny(request: Any, action: str, ids: Any) -> bool:
        return action != "set_limit"

    guarded = make_client(tasks=queue.registry, authorize=deny)
    assert 'id="do-set-limit"' not in guarded.get("/limits").text
    assert _confirm_page(guarded, do="set_limit", kind="k", name="global_concurrency",
                         value="1").status_code == 403
