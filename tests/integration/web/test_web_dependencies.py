"""The job page lists a job's parents and dependents with links and statuses, and says why it waits."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from starlette.testclient import TestClient
from support.workers import enqueue

from venturi_sa import Queue, Task


class Step(Task):
    KIND = "step"


def test_the_job_page_lists_parents_and_dependents(client: TestClient, engine: sa.Engine, models: Any) -> None:
    queue = Queue(models, [Step])
    a, b = enqueue(engine, queue, Step(), Step())
    [c] = enqueue(engine, queue, Step(), after=[a, b], if_parent_dead="run")
    page = client.get(f"/jobs/{c}")
    assert page.status_code == 200
    html = page.text
    assert 'id="parents"' in html and f'/jobs/{a}"' in html and f'/jobs/{b}"' in html
    assert 'data-code="waiting_on_parents"' in html and "waiting for 2 of 2 parents" in html
    parent = client.get(f"/jobs/{a}").text
    assert 'id="dependents"' in parent and f'/jobs/{c}"' in parent and ">run<" in parent
    plain = client.get(f"/jobs/{b}").text
    assert 'id="parents"' in plain  # b has a dependent, so the section is shown
