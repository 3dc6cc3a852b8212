"""The control actions of the jobs and job pages against the real database: cancel, retry now, run now,
set priority, run later, replace payload; each journaled with the actor, refusals shown per job."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import sqlalchemy as sa
from marshmallow import Schema, fields
from sqlalchemy.orm import Session
from starlette.testclient import TestClient
from support.ops import factory_session
from support.web import confirmed, csrf_of, msg_of

from venturi_sa import Queue, Task
from venturi_sa.web import create_app

ACTOR = "dashboard user at testclient"


class Mail(Task):
    KIND = "k_pending"

    class Payload(Schema):
        n = fields.Integer(required=True)
        state = fields.String()
        secret = fields.String()

    def run(self, ctx: Any) -> None:
        return None


def _act(client: TestClient, do: str, page: str = "/jobs", **form: Any) -> Any:
    token = csrf_of(client.get(page).text)
    return client.post("/actions", data={"csrf": token, "do": do, **form}, follow_redirects=False)


def _message(response: Any) -> str:
    assert response.status_code == 303, response.text
    return parse_qs(urlsplit(response.headers["location"]).query)["msg"][0]


def _backing_off(engine: sa.Engine, models: Any, n: int = 1) -> list[str]:
    """Pending jobs not eligible for an hour because their last run failed (journal: retried)."""
    with factory_session(engine, models) as (Job, Entry):
        jobs = [Job(scheduled=True, kind="k_backoff", run_count=1, failure_count=1) for _ in range(n)]
        for job in jobs:
            Entry(job=job, outcome="retried", note="boom")
        ids = [j.id for j in jobs]
    return ids


def _journal(engine: sa.Engine, models: Any, job_id: str) -> list[str]:
    return [e.note or "" for e in Queue(models).journal(engine, job_id)]


def test_cancel_ends_pending_jobs_and_requests_running_ones(engine: sa.Engine, models: Any, client: TestClient,
                                                            seeded: dict[str, list[str]]) -> None:
    queue = Queue(models)
    pending, claimed, done = seeded["pending"][0], seeded["claimed"][0], seeded["completed"][0]
    message = msg_of(confirmed(client, _act(client, "cancel:selected", ids=[pending, claimed, done],
                                            note="refunded")).text)
    assert message.startswith("Cancel: 2 job(s) changed (1 still running: cancel requested")
    assert f"1 refused: cannot cancel job {done}: it is already completed" in message
    assert queue.get_job(engine, pending).status == "dead"
    assert _journal(engine, models, pending)[-1] == f"cancelled by {ACTOR}: refunded"
    assert queue.get_job(engine, claimed).status == "claimed"  # its worker ends it at its next renewal
    with engine.connect() as conn:
        requested = conn.execute(sa.select(models.cancels_table.c.job_id, models.cancels_table.c.actor)).all()
    assert [tuple(r) for r in requested] == [(claimed, ACTOR)]
    assert f"cancel requested by {ACTOR}" in client.get(f"/jobs/{claimed}").text  # the page says why
    every = msg_of(confirmed(client, _act(client, "cancel:matching", kind="k_scheduled")).text)
    assert every.startswith("Cancel: 2 job(s) changed")
    assert {queue.get_job(engine, i).status for i in seeded["scheduled"]} == {"dead"}


def test_retry_now_takes_only_jobs_backing_off(engine: sa.Engine, models: Any, client: TestClient,
                                               seeded: dict[str, list[str]]) -> None:
    queue = Queue(models)
    waiting = _backing_off(engine, models, 2)
    scheduled = seeded["scheduled"][0]
    message = _message(_act(client, "retry_now:selected", ids=[waiting[0], scheduled]))
    assert message.startswith("Retry now: 1 job(s) changed; 1 refused: retry now refused: "
                              f"job {scheduled} is not backing off after a failure: it is waiting (scheduled)")
    job = queue.get_job(engine, waiting[0])
    assert job.visible_at <= datetime.now(timezone.utc)
    assert _journal(engine, models, waiting[0])[-1] == f"edited by {ACTOR}: run now"
    assert queue.get_job(engine, scheduled).visible_at > datetime.now(timezone.utc)
    rest = _message(_act(client, "retry_now:matching", status="pending"))
    assert rest.startswith("Retry now: 1 job(s) changed; 5 refused")  # the other one; 3 eligible, 2 scheduled
    assert queue.get_job(engine, waiting[1]).visible_at <= datetime.now(timezone.utc)


def test_run_now_and_run_later_move_visible_at(engine: sa.Engine, models: Any, client: TestClient,
                                               seeded: dict[str, list[str]]) -> None:
    queue = Queue(models)
    scheduled, eligible = seeded["scheduled"], seeded["pending"]
    message = _message(_act(client, "run_now:selected", ids=[scheduled[0], eligible[0]], note="VIP"))
    assert message.startswith("Run now: 1 job(s) changed; 1 refused: run now refused: "
                              f"job {eligible[0]} is eligible already")
    assert queue.get_job(engine, scheduled[0]).visible_at <= datetime.now(timezone.utc)
    assert _journal(engine, models, scheduled[0])[-1] == f"edited by {ACTOR}: run now (VIP)"

    later = _message(_act(client, "run_later:matching", kind="k_pending", run_at="2h"))
    assert later.startswith("Run later: 2 job(s) changed")
    soon = datetime.now(timezone.utc) + timedelta(hours=2)
    assert all(abs(queue.get_job(engine, i).visible_at - soon) < timedelta(minutes=5) for i in eligible)
    at = _message(_act(client, "run_later:selected", ids=[scheduled[1]], run_at="2031-01-02T03:04:05"))
    assert at.startswith("Run later: 1 job(s) changed")
    assert queue.get_job(engine, scheduled[1]).visible_at == datetime(2031, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
    claimed = _message(_act(client, "run_later:selected", ids=[seeded["claimed"][0]], run_at="1h"))
    assert f"1 refused: cannot edit job {seeded['claimed'][0]}: it is claimed" in claimed


def test_set_priority_on_the_selection_and_on_all_matching(engine: sa.Engine, models: Any, client: TestClient,
                                                           seeded: dict[str, list[str]]) -> None:
    queue = Queue(models)
    message = _message(_act(client, "set_priority:selected", ids=[seeded["pending"][0], seeded["claimed"][0]],
                            priority="0"))
    assert message.startswith("Set priority: 1 job(s) changed; 1 refused: "
                              f"cannot edit job {seeded['claimed'][0]}: it is claimed")
    assert queue.get_job(engine, seeded["pending"][0]).priority == 0
    assert _journal(engine, models, seeded["pending"][0])[-1] == f"edited by {ACTOR}: priority -> 0"
    every = _message(_act(client, "set_priority:matching", status="pending", kind="k_scheduled", priority="2"))
    assert every.startswith("Set priority: 2 job(s) changed")
    assert {queue.get_job(engine, i).priority for i in seeded["scheduled"]} == {2}


@pytest.mark.parametrize(("do", "fields", "error"), [
    ("set_priority:selected", {}, "Set priority: priority is required"),
    ("set_priority:matching", {"priority": "7"}, "priority must be 0 (HIGH), 1 (NORMAL) or 2 (LOW)"),
    ("set_priority:selected", {"priority": "high"}, "priority must be 0 (HIGH)"),
    ("run_later:selected", {"run_at": "tomorrow"}, "run_at &#39;tomorrow&#39; is neither a duration"),
    ("run_later:matching", {}, "run_at is required"),
    ("cancel:selected", {"note": "x" * 501}, "note must be at most 500 characters"),
    ("edit_payload:selected", {"payload": "{nope"}, "payload is not valid JSON"),
    ("edit_payload:selected", {"payload": "null"}, "payload must be a JSON value other than null"),
    ("edit_payload:matching", {"payload": "{}"}, "Replace payload applies to one job at a time"),
])
def test_bad_values_are_refused_before_any_job_is_touched(engine: sa.Engine, models: Any, client: TestClient,
                                                          seeded: dict[str, list[str]], do: str,
                                                          fields: dict[str, str], error: str) -> None:
    before = [(j.id, j.status, j.priority, j.visible_at, j.payload) for j in Queue(models).history(engine).items]
    response = _act(client, do, ids=seeded["pending"][:1], **fields)
    assert response.status_code == 400 and error in response.text, response.text
    after = [(j.id, j.status, j.priority, j.visible_at, j.payload) for j in Queue(models).history(engine).items]
    assert after == before


def test_the_job_page_replaces_a_payload_through_the_task_schema(engine: sa.Engine, models: Any,
                                                                 seeded: dict[str, list[str]]) -> None:
    queue = Queue(models)
    job_id = seeded["pending"][0]
    app = create_app(engine, models.prefix, listen=False, tasks=[Mail])
    with TestClient(app) as client:
        page = client.get(f"/jobs/{job_id}").text
        assert 'id="job-edit_payload"' in page and "&#34;secret&#34;: &#34;hunter2&#34;" in page  # prefilled
        assert 'id="job-cancel"' in page and 'id="job-run_now"' in page and 'id="in-priority"' in page
        page = f"/jobs/{job_id}"
        bad = _message(_act(client, "edit_payload:selected", page, ids=[job_id], payload='{"n": "many"}',
                            next=page))
        assert bad.startswith("Replace payload: 0 job(s) changed; 1 refused:") and "n: ['Not a valid integer.']" in bad
        assert queue.get_job(engine, job_id).payload["n"] == 0  # nothing written
        good = _message(_act(client, "edit_payload:selected", page, ids=[job_id], payload='{"n": 42}',
                             next=page))
        assert good.startswith("Replace payload: 1 job(s) changed")
        assert queue.get_job(engine, job_id).payload == {"n": 42}
        assert _journal(engine, models, job_id)[-1] == f"edited by {ACTOR}: payload replaced"
        two = _act(client, "edit_payload:selected", page, ids=seeded["pending"], payload='{"n": 1}')
        assert two.status_code == 400 and "one job at a time" in two.text
        other = client.get(f"/jobs/{seeded['scheduled'][0]}").text  # kind k_scheduled: no task type given
        assert 'id="no-payload-edit"' in other and 'id="job-edit_payload"' not in other
        done = client.get(f"/jobs/{seeded['completed'][0]}").text
        assert 'id="job-cancel"' not in done and 'id="in-priority"' not in done


def test_a_redacted_payload_is_never_prefilled(engine: sa.Engine, models: Any, seeded: dict[str, list[str]]) -> None:
    def redact(kind: str, field: str, value: Any) -> Any:
        return {**value, "secret": "***"} if isinstance(value, dict) and "secret" in value else value

    app = create_app(engine, models.prefix, listen=False, tasks=[Mail], redact=redact)
    with TestClient(app) as client:
        page = client.get(f"/jobs/{seeded['pending'][0]}").text
    assert 'id="in-payload"' in page and "hunter2" not in page
    assert "&#34;secret&#34;: &#34;***&#34;" in page  # shown redacted, the form left empty


def test_the_job_page_says_which_schedule_fired_it_and_its_time_limit(
        engine: sa.Engine, models: Any, client: TestClient, seeded: dict[str, list[str]]) -> None:
    from venturi_sa import task
    from venturi_sa.periodic import reconcile

    report: type[Task] = task("web_report")(lambda ctx: None)
    queue = Queue(models, [report])
    queue.schedule(report(), every=timedelta(hours=6), name="every-six-hours")
    reconcile(queue, engine)
    job_id = queue.run_schedule_now(engine, "every-six-hours")
    page = client.get(f"/jobs/{job_id}").text
    assert 'id="fired"' in page and "fired by schedule" in page and "every-six-hours" in page
    assert 'id="fired"' not in client.get(f"/jobs/{seeded['pending'][0]}").text
    assert '<td id="time-limit"></td>' in page
    with Session(engine) as session, session.begin():
        limited = queue.enqueue(session, report(), timeout=timedelta(seconds=45)).id
    assert '<td id="time-limit">45s (set at enqueue' in client.get(f"/jobs/{limited}").text


def test_a_database_error_stops_the_walk_and_says_where(engine: sa.Engine, models: Any,
                                                        seeded: dict[str, list[str]]) -> None:
    from venturi_sa.web import Action, ActionContext

    ran: list[str] = []
    broken = seeded["dead"][1]

    def touch(ctx: ActionContext, job_id: str) -> object:
        ran.append(job_id)
        with ctx.engine.connect() as conn:  # a real error from the server on the second job
            conn.execute(sa.text("SELECT 1 / :d"), {"d": 0 if job_id == broken else 1})
        return None

    app = create_app(engine, models.prefix, listen=False,
                     actions=[Action(name="touch", label="Touch", statuses=("dead", "completed"), run=touch)])
    ids = [seeded["dead"][0], broken, seeded["completed"][0]]
    with TestClient(app) as client:
        message = _message(_act(client, "touch:selected", ids=ids))
    assert message == f"Touch: 1 job(s) changed; stopped: the database failed on job {broken}: division by zero"
    assert ran == ids[:2]  # the third was not attempted
