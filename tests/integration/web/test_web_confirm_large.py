"""A kill or cancel of any size the dashboard allows (up to 2,000 jobs) is confirmed through one signed field.

The confirmation acts on exactly what it showed: a job whose status changed
between the page and its button is reported and left out; an altered or
expired confirmation is refused and nothing changes.
"""

from __future__ import annotations

import re
import time
from typing import Any

import pytest
import sqlalchemy as sa
from starlette.testclient import TestClient
from support.web import confirm_form, confirmed, csrf_of, many_pending, msg_of

from venturi_sa import Queue
from venturi_sa.web import create_app

SECRET = b"a confirmation test secret, 32b"


@pytest.mark.timeout(180)
def test_a_kill_all_of_1500_jobs_is_confirmed_and_acts_on_all(client: TestClient, engine: sa.Engine,
                                                              models: Any) -> None:
    ids = many_pending(engine, models.prefix, 1500, "k_many")
    token = csrf_of(client.get("/jobs?kind=k_many").text)
    asked = client.post("/actions", data={"csrf": token, "do": "kill:matching", "kind": "k_many"})
    assert "Kill 1500 job(s)?" in asked.text and "k_many</span>: 1500" in asked.text
    assert len(confirm_form(asked.text)) == 4
    done = confirmed(client, asked)
    assert done.status_code == 200, done.text[:500]
    assert msg_of(done.text) == "Kill: 1500 job(s) changed"
    with engine.connect() as conn:
        statuses = conn.exec_driver_sql(f"SELECT status, count(*) FROM {models.prefix}_jobs "
                                        "WHERE kind = 'k_many' GROUP BY status").all()
    assert dict(statuses) == {"dead": len(ids)}


def test_a_job_that_changed_after_the_confirmation_is_reported_not_included(
        client: TestClient, engine: sa.Engine, models: Any, seeded: dict[str, list[str]]) -> None:
    queue = Queue(models)
    running, bystander = seeded["claimed"]
    waiting = seeded["pending"][0]
    token = csrf_of(client.get("/jobs").text)
    asked = client.post("/actions", data={"csrf": token, "do": "cancel:selected", "ids": [running, waiting]})
    assert "Cancel 2 job(s)?" in asked.text
    queue.release(engine, running, "worker lost")  # claimed when confirmed, pending now: not what was confirmed
    done = confirmed(client, asked)
    message = msg_of(done.text)
    assert message.startswith("Cancel: 1 job(s) changed; 1 refused: "), message
    assert f"job {running} changed since the confirmation (was claimed, now pending): left out" in message
    rows = dict(re.findall(r'<tr data-id="([^"]+)">.*?<td class="wrap">([^<]*)</td>', done.text, re.DOTALL))
    assert rows[waiting] == "changed" and rows[running].startswith("refused: job ")
    assert queue.get_job(engine, running).status == "pending"
    assert queue.get_job(engine, waiting).status == "dead"
    assert queue.get_job(engine, bystander).status == "claimed"


def test_an_altered_or_expired_confirmation_is_refused(engine: sa.Engine, models: Any,
                                                       seeded: dict[str, list[str]]) -> None:
    from venturi_sa.web.confirm_token import CONFIRM_SECONDS, encode

    queue = Queue(models)
    target = seeded["pending"][0]
    app = create_app(engine, models.prefix, listen=False, secret=SECRET)
    with TestClient(app) as client:
        token = csrf_of(client.get("/jobs").text)
        asked = client.post("/actions", data={"csrf": token, "do": "kill:selected", "ids": [target]})
        fields = dict(confirm_form(asked.text))
        others = seeded["pending"][1:] + seeded["scheduled"]
        forged = encode(b"another secret, also 32 bytes...", token, "kill", "", {i: "pending" for i in others})
        stale = encode(SECRET, token, "kill", "", {target: "pending"}, now=time.time() - CONFIRM_SECONDS - 1)
        for selection, why in ((forged, "does not match"), (stale, "expired")):
            response = client.post("/actions", data={**fields, "selection": selection}, follow_redirects=False)
            assert response.status_code == 400 and why in response.text, response.text[:400]
        assert {queue.get_job(engine, i).status for i in (target, *others)} == {"pending"}
        fresh = encode(SECRET, token, "kill", "", {target: "pending"})  # made as the page makes it: acts
        response = client.post("/actions", data={**fields, "selection": fresh})
        assert msg_of(response.text) == "Kill: 1 job(s) changed"
    app.state.dashboard.feed.close()
