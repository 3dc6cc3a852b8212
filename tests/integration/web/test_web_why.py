"""The job page says why as ``queue.explain`` does, with the dashboard's task code (issue 40, item 3)."""

from __future__ import annotations

import html
import os
import re
import sys
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import sqlalchemy as sa
from starlette.testclient import TestClient
from support.hooks import drain
from support.web import csrf_of
from support.why_jobs import fan_in, jobs_in_every_state, key_limited
from support.workers import enqueue

from venturi_sa.web import create_app

pytest.importorskip("flask_sqlalchemy")


@pytest.fixture
def queue(pg_url: str, models: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setitem(os.environ, "ADOPTION_PREFIX", models.prefix)
    monkeypatch.setitem(os.environ, "ADOPTION_URL", pg_url)
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


def page(client: TestClient, job_id: str) -> str:
    response = client.get(f"/jobs/{job_id}")
    assert response.status_code == 200
    return html.unescape(response.text)


def test_a_key_limited_job_is_limited_with_the_tasks_and_unknown_without(engine: sa.Engine, queue: Any,
                                                                         make_client: Any) -> None:
    _, held = key_limited(engine, queue)
    shown = page(make_client(tasks=queue.registry), held)
    for reason in queue.explain(engine, held).reasons:
        assert f'data-code="{reason.code}"' in shown and reason.text in shown
    assert "key_concurrency 1 of key 'user:1' is full" in shown and "eligible now: " not in shown
    bare = page(make_client(), held)
    assert 'data-code="limits_unknown"' in bare and "eligible now: " not in bare and "eligible since" not in bare


def test_a_fan_in_page_names_its_parents_not_a_missing_worker(engine: sa.Engine, queue: Any,
                                                              make_client: Any) -> None:
    child = fan_in(engine, queue)
    shown = page(make_client(tasks=queue.registry), child)
    assert "waiting for 2 of 2 parents" in shown and "is a worker running" not in shown


def test_the_overview_counts_each_state_in_its_column_and_marks_paused_kinds(engine: sa.Engine, queue: Any,
                                                                             make_client: Any) -> None:
    jobs_in_every_state(engine, queue)
    stats = queue.stats(engine)
    shown = make_client(tasks=queue.registry).get("/").text
    for card, key in (("eligible", "eligible"), ("scheduled", "scheduled"), ("backoff", "backoff"),
                      ("sleeping", "sleeping"), ("signal", "waiting_for_signal"), ("parents", "waiting"),
                      ("inflight", "in_flight")):
        assert f'id="n-{card}">{getattr(stats, key)}<' in shown, card
    assert (stats.sleeping, stats.waiting_for_signal, stats.waiting, stats.backoff) == (1, 1, 1, 1)
    rows = re.findall(r"<tr( class=\"paused\")?><td><a href=\"/jobs\?kind=([a-z_]+)\">", shown)
    assert {kind for paused, kind in rows if paused} == {"flaky"}
    for kind, counts in stats.by_kind.items():
        cells = re.search(rf'kind={kind}">{kind}</a>.*?</td>\s*((?:<td>\d+</td>){{7}})', shown, re.S)
        assert cells is not None, kind
        numbers = [int(n) for n in re.findall(r"\d+", cells.group(1))]
        assert numbers == [counts[c] for c in ("eligible", "scheduled", "backoff", "sleeping",
                                               "waiting_for_signal", "waiting", "claimed")], kind


def _send(client: TestClient, job_id: str, **form: Any) -> Any:
    token = csrf_of(client.get(f"/jobs/{job_id}").text)
    return client.post("/actions", data={"csrf": token, "do": "send_signal:selected", "ids": job_id,
                                         "next": f"/jobs/{job_id}", **form}, follow_redirects=False)


def test_send_signal_from_the_job_page_wakes_a_waiting_job(engine: sa.Engine, queue: Any, make_client: Any) -> None:
    [waiter] = enqueue(engine, queue, queue.registry.get("await_go")())
    drain(queue, engine, kinds=["await_go"])
    assert queue.explain(engine, waiter).codes[0] == "waiting_for_signal"
    client = make_client(tasks=queue.registry)
    page = client.get(f"/jobs/{waiter}").text
    assert 'id="job-send_signal"' in page and 'id="in-signal_name"' in page
    assert _send(client, waiter, signal_name="go", signal_payload="{bad").status_code == 400
    assert _send(client, waiter, signal_payload="{}").status_code == 400  # a name is required
    forged = client.post("/actions", data={"do": "send_signal:selected", "ids": waiter, "signal_name": "go"},
                         follow_redirects=False)
    assert forged.status_code == 403
    assert [s.name for s in queue.signals(engine, waiter)] == []  # nothing sent so far
    sent = _send(client, waiter, signal_name="go", signal_payload='{"approved": true}')
    assert sent.status_code == 303
    message = parse_qs(urlsplit(sent.headers["location"]).query)["msg"][0]
    assert "1 job(s) changed" in message and "signal go woke" in message
    [signal] = queue.signals(engine, waiter)
    assert (signal.name, signal.payload) == ("go", {"approved": True})
    assert queue.explain(engine, waiter).codes[0] != "waiting_for_signal"
    read_only = make_client(tasks=queue.registry, read_only=True)
    assert 'id="job-send_signal"' not in read_only.get(f"/jobs/{waiter}").text
