"""The dashboard's pages and actions against the real database, through Starlette's TestClient."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from starlette.responses import HTMLResponse
from starlette.testclient import TestClient
from support.web import confirmed, csrf_of, factory_session, msg_of

from venturi_sa import Queue
from venturi_sa.web import Action, ActionContext, Page, create_app


def test_overview_shows_counts_charts_and_kinds(client: TestClient, seeded: dict[str, list[str]]) -> None:
    page = client.get("/")
    assert page.status_code == 200
    html = page.text
    assert '<span class="n" id="n-eligible">2</span>' in html
    assert '<span class="n" id="n-scheduled">2</span>' in html
    assert '<span class="n" id="n-inflight">4</span>' in html
    assert '<span class="n" id="n-expired">2</span>' in html
    assert '<span class="n" id="n-dead">2</span>' in html
    assert html.count('<svg class="chart"') == 2 and "<rect " in html  # the journal rows are charted
    assert "k_dead" in html and "/jobs?kind=k_dead" in html
    day = client.get("/?window=day")
    assert day.status_code == 200 and "15 minutes" in day.text
    assert client.get("/?window=week").status_code == 400
    fragment = client.get("/fragment/overview")
    assert fragment.status_code == 200 and "<html" not in fragment.text and 'id="n-dead"' in fragment.text


def _ids(html: str) -> set[str]:
    import re

    return set(re.findall(r'name="ids" value="([^"]+)"', html))


def test_jobs_list_filters(client: TestClient, seeded: dict[str, list[str]]) -> None:
    every = {i for ids in seeded.values() for i in ids}
    assert _ids(client.get("/jobs").text) == every
    assert _ids(client.get("/jobs?status=dead").text) == set(seeded["dead"])
    assert _ids(client.get("/jobs?kind=k_claimed").text) == set(seeded["claimed"])
    assert _ids(client.get("/jobs?status=claimed&kind=k_expired").text) == set(seeded["expired"])
    assert _ids(client.get("/jobs?window=15m").text) == every
    assert _ids(client.get(f"/jobs?q=note+for+{seeded['dead'][0]}").text) == {seeded["dead"][0]}  # a journal note
    assert _ids(client.get('/jobs?q="state": "completed"').text) == set(seeded["completed"])  # payload text
    assert _ids(client.get("/jobs?q=100%25").text) == set()  # LIKE wildcards are literal
    assert "no jobs match" in client.get("/jobs?kind=nope").text
    for bad in ("status=finished", "window=1y", "after=garbage", "kind=" + "x" * 201):
        response = client.get(f"/jobs?{bad}")
        assert response.status_code == 400, bad
        assert 'id="error"' in response.text


def test_jobs_pages_by_keyset(engine: sa.Engine, models: Any, client: TestClient) -> None:
    from support.ops import factory_session

    with factory_session(engine, models) as (Job, _):
        made = {Job(kind="bulk").id for _ in range(120)}
    seen: list[str] = []
    url = "/jobs?kind=bulk"
    while url:
        html = client.get(url).text
        page = list(_ids(html))
        assert len(page) <= 50
        seen += page
        import re

        more = re.search(r'href="(/jobs\?[^"]+)" id="next-page"', html)
        url = more.group(1).replace("&amp;", "&") if more else ""
    assert len(seen) == 120 and set(seen) == made


def test_job_detail_shows_fields_payload_and_timeline(client: TestClient, seeded: dict[str, list[str]]) -> None:
    job_id = seeded["dead"][0]
    html = client.get(f"/jobs/{job_id}").text
    assert job_id in html and "&#34;state&#34;: &#34;dead&#34;" in html  # pretty JSON, escaped
    assert f"dead note for {job_id}" in html and 'id="journal"' in html
    assert 'id="reason"' in html and "dead: dead note" in html
    assert 'id="job-requeue"' in html and 'id="job-kill"' not in html  # only what the status allows
    scheduled = client.get(f"/jobs/{seeded['scheduled'][0]}").text
    assert "scheduled for " in scheduled and 'data-code="scheduled"' in scheduled  # as queue.explain says
    expired = client.get(f"/jobs/{seeded['expired'][0]}").text
    assert "lease expired" in expired
    fragment = client.get(f"/fragment/jobs/{job_id}").text
    assert "<html" not in fragment and 'id="journal"' in fragment
    missing = client.get("/jobs/01NOSUCHJOB0000000000000000")
    assert missing.status_code == 404 and "no job with id" in missing.text


def test_workers_page_lists_claimers(client: TestClient, seeded: dict[str, list[str]]) -> None:
    html = client.get("/workers").text
    assert "factory-host:" in html and "ghost-host:" in html
    assert all(i in html for i in seeded["claimed"] + seeded["expired"])
    assert "(expired)" in html
    assert client.get("/fragment/workers").status_code == 200


def test_schedules_page_lists_schedules_and_pauses(engine: sa.Engine, models: Any, client: TestClient) -> None:
    from datetime import timedelta

    from venturi_sa import Task, task
    from venturi_sa.periodic import reconcile

    report: type[Task] = task("nightly_report")(lambda ctx: None)
    queue = Queue(models, [report])
    assert "no schedule is declared" in client.get("/schedules").text
    queue.schedule(report(), every=timedelta(hours=6), name="every-six-hours")
    reconcile(queue, engine)
    queue.pause(engine, "nightly_report", reason="SMTP outage", delay=timedelta(hours=1), actor="ops@example")
    html = client.get("/schedules").text
    assert "every-six-hours" in html and "nightly_report" in html and "live" in html
    assert "SMTP outage" in html and "ops@example" in html
    queue.resume(engine, "nightly_report")
    assert "no kind is paused" in client.get("/fragment/schedules").text


def _act(client: TestClient, do: str, **fields: Any) -> Any:
    token = csrf_of(client.get("/jobs").text)
    return client.post("/actions", data={"csrf": token, "do": do, **fields}, follow_redirects=False)


def test_bulk_action_on_the_selection_journals_the_actor(engine: sa.Engine, models: Any, client: TestClient,
                                                          seeded: dict[str, list[str]]) -> None:
    queue = Queue(models)
    target = seeded["dead"][0]
    response = _act(client, "requeue:selected", ids=[target, seeded["completed"][0]], note="fixed",
                    next="/jobs?status=dead")
    assert response.status_code == 303
    location = response.headers["location"]
    assert location.startswith("/jobs?status=dead&msg=") and "1+job" in location and "1+refused" in location
    assert queue.get_job(engine, target).status == "pending"
    assert queue.get_job(engine, seeded["completed"][0]).status == "completed"
    note = queue.journal(engine, target)[-1].note
    assert note == "requeued by dashboard user at testclient: fixed"
    shown = client.get(location)
    assert "Requeue: 1 job(s) changed" in shown.text


def test_bulk_action_on_all_matching_the_filter(engine: sa.Engine, models: Any, client: TestClient,
                                                 seeded: dict[str, list[str]]) -> None:
    queue = Queue(models)
    asked = _act(client, "kill:matching", kind="k_pending")  # pending jobs of that kind only
    assert {queue.get_job(engine, i).status for i in seeded["pending"]} == {"pending"}  # not yet: confirm first
    assert "Kill 2 job(s)?" in asked.text and "k_pending</span>: 2" in asked.text and "kind=k_pending" in asked.text
    response = confirmed(client, asked)
    assert response.status_code == 200 and msg_of(response.text) == "Kill: 2 job(s) changed"
    assert {queue.get_job(engine, i).status for i in seeded["pending"]} == {"dead"}
    assert {queue.get_job(engine, i).status for i in seeded["scheduled"]} == {"pending"}  # other kind
    released = _act(client, "release:matching", status="claimed")
    assert "4+job" in released.headers["location"]
    assert {queue.get_job(engine, i).status for i in seeded["claimed"] + seeded["expired"]} == {"pending"}
    nothing = _act(client, "requeue:matching", status="pending")  # requeue applies to dead jobs only
    assert "0+job" in nothing.headers["location"]


def test_unknown_action_and_empty_selection_are_refused(client: TestClient, seeded: dict[str, list[str]]) -> None:
    assert _act(client, "explode:selected", ids=seeded["dead"]).status_code == 400
    assert _act(client, "requeue:everything", ids=seeded["dead"]).status_code == 400
    assert _act(client, "requeue:selected").status_code == 400
    assert _act(client, "requeue:selected", ids=[f"id{i}" for i in range(2001)]).status_code == 400


def test_redaction_hook_hides_payload_carry_and_attachments(engine: sa.Engine, models: Any,
                                                            seeded: dict[str, list[str]]) -> None:
    def redact(kind: str, field: str, value: Any) -> Any:
        if isinstance(value, dict):
            return {k: "***" if k in ("secret", "token") else v for k, v in value.items()}
        return value

    app = create_app(engine, models.prefix, redact=redact, listen=False)
    with TestClient(app) as client:
        pages = [client.get("/jobs").text, client.get(f"/jobs/{seeded['completed'][0]}").text]
    assert all("hunter2" not in html for html in pages)
    assert "***" in pages[1]


def test_extension_pages_and_actions_plug_in(engine: sa.Engine, models: Any, seeded: dict[str, list[str]]) -> None:
    touched: list[tuple[str, str]] = []

    def tag(ctx: ActionContext, job_id: str) -> object:
        touched.append((ctx.actor, job_id))
        return None

    def reports(request: Any, dashboard: Any) -> Any:
        return dashboard.render(request, "error.html", page="/reports", message="reports go here")

    app = create_app(engine, models.prefix, listen=False, actor=lambda request: "ops-bot",
                     actions=[Action(name="tag", label="Tag", statuses=("dead",), run=tag)],
                     pages=[Page(path="/reports", title="Reports", endpoint=reports),
                            Page(path="/raw", title="Raw", nav=False,
                                 endpoint=lambda request, dashboard: HTMLResponse("raw"))])
    with TestClient(app) as client:
        overview = client.get("/").text
        assert 'href="/reports"' in overview and 'href="/raw"' not in overview
        assert "reports go here" in client.get("/reports").text
        assert client.get("/raw").text == "raw"
        assert 'id="all-tag"' in client.get("/jobs").text
        assert _act(client, "tag:matching", status="dead").status_code == 303
    assert sorted(touched) == sorted(("ops-bot", i) for i in seeded["dead"])


def test_a_name_registered_twice_is_an_error(engine: sa.Engine, models: Any) -> None:
    import pytest

    with pytest.raises(ValueError, match="'kill' is registered twice"):
        create_app(engine, models.prefix, actions=[Action(name="kill", label="K", statuses=(), run=print)])


def test_dead_jobs_are_counted_per_kind_up_to_a_cap(engine: sa.Engine, models: Any) -> None:
    from datetime import datetime, timezone

    from support.ops import factory_session

    from venturi_sa.storage.dashboard import DEAD_COUNT_CAP, OverviewCounts, dead_counts_statement
    from venturi_sa.web.queries import _counts

    with factory_session(engine, models) as (Job, _):
        for kind, n in (("a", 5), ("b", 2), ("c", 4)):
            for _ in range(n):
                Job(dead=True, kind=kind)
        Job(completed=True, kind="d")
    with engine.connect() as conn:
        capped = [tuple(r) for r in conn.execute(dead_counts_statement(models, cap=4))]
        exact = [tuple(r) for r in conn.execute(dead_counts_statement(models))]
    assert capped == [("a", 4), ("b", 2), ("c", 4)]
    assert exact == [("a", 5), ("b", 2), ("c", 4)]
    raw = OverviewCounts(as_of=datetime.now(timezone.utc), pending=[], expired=[], claimed=[], finished=[],
                         dead=[("a", DEAD_COUNT_CAP), ("b", 2)])
    counts = _counts(raw, [], [])
    assert (counts.dead(), counts.dead("a"), counts.dead("b")) == (f"{DEAD_COUNT_CAP + 2}+", f"{DEAD_COUNT_CAP}+", "2")


def test_the_job_list_shows_each_jobs_last_error(engine: sa.Engine, models: Any, client: TestClient) -> None:
    with factory_session(engine, models) as (Job, Entry):
        failing = Job(scheduled=True, kind="k_flaky", run_count=2, failure_count=2)
        Entry(job=failing, outcome="retried", note="first: timeout")
        Entry(job=failing, outcome="retried", note="ConnectionError: smtp refused")
        fine = Job(pending=True, kind="k_fine")
        failing_id, fine_id = failing.id, fine.id
    page = client.get("/jobs").text
    row = page.split(f'data-id="{failing_id}"')[1].split("</tr>")[0]
    assert "retried: ConnectionError: smtp refused" in row and "first: timeout" not in row
    quiet = page.split(f'data-id="{fine_id}"')[1].split("</tr>")[0]
    assert 'class="wrap error" title=""></td>' in quiet


def test_the_overview_has_each_kinds_throughput(client: TestClient, engine: sa.Engine, models: Any) -> None:
    with factory_session(engine, models) as (Job, Entry):
        for _ in range(6):
            Entry(job=Job(completed=True, kind="k_fast"), outcome="completed")
        Entry(job=Job(completed=True, kind="k_slow"), outcome="completed")
    import re

    rates = dict(re.findall(r'jobs\?kind=(k_\w+)">k_\w+</a></td>(?:\s*<td>[^<]*</td>){9}\s*<td>\d+</td>'
                            r'<td class="rate">([\d.]+)</td>', client.get("/").text))
    assert rates == {"k_fast": "0.10", "k_slow": "0.02"}  # completed per minute over the last hour
    day = client.get("/?window=day").text
    assert '<td class="rate">0.00</td>' in day  # 6 in a day: 0.004 per minute


def test_the_list_sorts_by_creation_either_way_by_keyset(client: TestClient, engine: sa.Engine, models: Any) -> None:
    from datetime import datetime, timedelta, timezone

    from venturi_sa.storage.dashboard import JobFilter, JobPageParams
    from venturi_sa.web import queries

    start = datetime(2026, 1, 1, tzinfo=timezone.utc)
    with factory_session(engine, models) as (Job, _):
        made = [Job(pending=True, kind="k_sorted", created_at=start + timedelta(minutes=i)).id for i in range(5)]
    flt = JobFilter(kind="k_sorted")
    seen: list[str] = []
    params = JobPageParams(filter=flt, limit=2, oldest_first=True)
    while True:  # keyset pages, oldest first: no OFFSET, no row twice
        page = queries.jobs(models, engine, params)
        seen += [j.id for j in page.items]
        if page.next_after is None:
            break
        params = JobPageParams(filter=flt, limit=2, oldest_first=True, after=page.next_after)
    assert seen == made
    oldest = client.get("/jobs?kind=k_sorted&sort=oldest").text
    assert [oldest.index(f'data-id="{i}"') for i in made] == sorted(oldest.index(f'data-id="{i}"') for i in made)
    assert 'id="sort-created"' in oldest and "created ↑" in oldest and "sort=oldest" not in oldest.split(
        'id="sort-created"')[0].rsplit("<a", 1)[1]
    newest = client.get("/jobs?kind=k_sorted").text
    assert [newest.index(f'data-id="{i}"') for i in reversed(made)] == sorted(
        newest.index(f'data-id="{i}"') for i in made)
    refused = client.get("/jobs?sort=kind")
    assert refused.status_code == 400 and "sorts by creation time only" in refused.text
