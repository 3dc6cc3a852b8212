"""The Schedules & pauses page's operations against the real database: pause and resume a kind
(recorded with the actor), pause and resume a schedule; refusals come back as the page's message."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import sqlalchemy as sa
from starlette.testclient import TestClient
from support.ops import factory_session
from support.web import csrf_of

from venturi_sa import Queue, Task, task
from venturi_sa.periodic import reconcile

ACTOR = "dashboard user at testclient"


def _operate(client: TestClient, **form: Any) -> str:
    """POST one operation from the page; the message it redirects back to /schedules with."""
    token = csrf_of(client.get("/schedules").text)
    response = client.post("/schedules", data={"csrf": token, **form}, follow_redirects=False)
    assert response.status_code == 303, response.text
    location = urlsplit(response.headers["location"])
    assert location.path == "/schedules"
    return parse_qs(location.query)["msg"][0]


def test_pause_a_kind_with_a_reason_and_an_end_then_resume_it(engine: sa.Engine, models: Any,
                                                              client: TestClient) -> None:
    queue = Queue(models)
    assert 'id="do-pause-kind"' in client.get("/schedules").text
    message = _operate(client, do="pause_kind", kind="send_receipt", reason="SMTP outage", until="2h")
    assert message.startswith("kind send_receipt paused until ")
    [paused] = queue.pauses(engine)
    assert (paused.kind, paused.reason, paused.actor) == ("send_receipt", "SMTP outage", ACTOR)
    assert paused.resume_at is not None
    assert abs(paused.resume_at - datetime.now(timezone.utc) - timedelta(hours=2)) < timedelta(minutes=5)
    page = client.get("/schedules").text
    assert 'id="resume-send_receipt"' in page and "SMTP outage" in page
    with factory_session(engine, models) as (Job, _):
        waiting = Job(kind="send_receipt").id
    why = client.get(f"/jobs/{waiting}").text  # the job page says why it waits
    assert "kind &#39;send_receipt&#39; is paused by dashboard user at testclient" in why
    assert _operate(client, do="resume_kind", kind="send_receipt") == "kind send_receipt resumed"
    assert queue.pauses(engine) == []
    [record] = queue.pauses(engine, in_force_only=False)
    assert record.resumed_by == ACTOR
    assert _operate(client, do="pause_kind", kind="*") == "kind * paused until resumed"
    assert "every kind" in client.get("/fragment/schedules").text


def test_refused_operations_say_why_and_change_nothing(engine: sa.Engine, models: Any, client: TestClient) -> None:
    queue = Queue(models)
    not_paused = _operate(client, do="resume_kind", kind="nothing_paused")
    assert not_paused == "resume kind refused: kind 'nothing_paused' is not paused in queue " + repr(models.prefix)
    past = _operate(client, do="pause_kind", kind="k", until="2001-01-01T00:00:00Z")
    assert past.startswith("pause kind refused: until 2001-01-01T00:00:00+00:00 is not in the future")
    missing = _operate(client, do="pause_schedule", name="no-such-schedule")
    assert missing == "pause schedule refused: no schedule named 'no-such-schedule' (see `venturi schedules`)"
    assert queue.pauses(engine, in_force_only=False) == []


@pytest.mark.parametrize(("form", "error"), [
    ({"do": "pause_kind"}, "kind is required"),
    ({"do": "pause_kind", "kind": "k", "until": "soon"}, "until &#39;soon&#39; is neither a duration"),
    ({"do": "resume_schedule"}, "name is required"),
    ({"do": "explode"}, "unknown operation"),
])
def test_bad_input_is_refused_before_anything_runs(engine: sa.Engine, models: Any, client: TestClient,
                                                   form: dict[str, str], error: str) -> None:
    token = csrf_of(client.get("/schedules").text)
    response = client.post("/schedules", data={"csrf": token, **form}, follow_redirects=False)
    assert response.status_code == 400 and error in response.text, response.text
    assert Queue(models).pauses(engine, in_force_only=False) == []


def test_pause_and_resume_a_schedule(engine: sa.Engine, models: Any, client: TestClient) -> None:
    report: type[Task] = task("nightly_report")(lambda ctx: None)
    queue = Queue(models, [report])
    queue.schedule(report(), every=timedelta(hours=6), name="every-six-hours")
    reconcile(queue, engine)
    assert 'id="pause-every-six-hours"' in client.get("/schedules").text
    assert _operate(client, do="pause_schedule", name="every-six-hours") == "schedule every-six-hours paused"
    [schedule] = queue.list_schedules(engine)
    assert schedule.paused
    assert 'id="resume-every-six-hours"' in client.get("/schedules").text
    assert _operate(client, do="resume_schedule", name="every-six-hours") == "schedule every-six-hours resumed"
    [schedule] = queue.list_schedules(engine)
    assert not schedule.paused and schedule.next_at > datetime.now(timezone.utc)


def test_run_a_schedule_now(engine: sa.Engine, models: Any, client: TestClient) -> None:
    report: type[Task] = task("nightly_report")(lambda ctx: None)
    queue = Queue(models, [report])
    queue.schedule(report(), every=timedelta(hours=6), name="every-six-hours")
    reconcile(queue, engine)
    [before] = queue.list_schedules(engine)
    assert 'id="run-every-six-hours"' in client.get("/schedules").text
    message = _operate(client, do="run_schedule", name="every-six-hours")
    assert message.startswith("schedule every-six-hours fired now: job ")
    job_id = message.rsplit(" ", 1)[1]
    assert queue.get_job(engine, job_id).kind == "nightly_report"
    [after] = queue.list_schedules(engine)
    assert after.next_at == before.next_at and after.fired == before.fired + 1 and after.last_job == job_id
    refused = _operate(client, do="run_schedule", name="nosuch")
    assert refused == "run schedule refused: no schedule named 'nosuch' (see `venturi schedules`)"
