"""The job page says why as ``queue.explain`` does, with the dashboard's task code (issue 40, item 3)."""

from __future__ import annotations

import html
import os
import re
import sys
from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa
from starlette.testclient import TestClient
from support.why_jobs import fan_in, jobs_in_every_state, key_limited

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
