"""A payload edit on which the task's own ``limit_key()`` raises: refused naming the error, nothing written.

Through ``queue.edit`` (``InvalidPayload``) and through the dashboard's
"Replace payload" (the job is listed as refused, never a 500).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import sqlalchemy as sa
from marshmallow import Schema, fields
from starlette.testclient import TestClient
from support.web import csrf_of
from support.workers import enqueue

from venturi_sa import InvalidPayload, Queue, Task
from venturi_sa.web import create_app


class Keyed(Task):
    KIND = "edit_keyed"
    key_concurrency = 2

    class Payload(Schema):
        customer = fields.Raw(required=True)

    def limit_key(self) -> str | None:
        return "customer-" + self.payload["customer"]  # TypeError for a customer that is not a string

    def run(self, ctx: Any) -> None:
        return None


def _state(engine: sa.Engine, models: Any, queue: Queue, job_id: str) -> tuple[Any, ...]:
    key = models.Limits.Key
    with engine.connect() as conn:
        keys = conn.execute(sa.select(key.key).where(key.job_id == job_id)).scalars().all()
    return queue.get_job(engine, job_id).payload, keys, len(queue.journal(engine, job_id))


def test_queue_edit_refuses_a_payload_that_breaks_limit_key(engine: sa.Engine, models: Any) -> None:
    queue = Queue(models, [Keyed])
    [job_id] = enqueue(engine, queue, Keyed(customer="ann"))
    before = _state(engine, models, queue, job_id)
    with pytest.raises(InvalidPayload, match=r"Keyed.limit_key\(\): it raised TypeError"):
        queue.edit(engine, job_id, payload={"customer": 7})
    assert before[1] == ["customer-ann"] and _state(engine, models, queue, job_id) == before
    queue.edit(engine, job_id, payload={"customer": "bob"})
    assert _state(engine, models, queue, job_id)[:2] == ({"customer": "bob"}, ["customer-bob"])


def test_the_dashboard_lists_such_an_edit_as_refused(engine: sa.Engine, models: Any) -> None:
    queue = Queue(models, [Keyed])
    [job_id] = enqueue(engine, queue, Keyed(customer="ann"))
    before = _state(engine, models, queue, job_id)
    with TestClient(create_app(engine, models.prefix, listen=False, tasks=[Keyed])) as client:
        token = csrf_of(client.get("/jobs").text)
        response = client.post("/actions", data={"csrf": token, "do": "edit_payload:selected", "ids": [job_id],
                                                 "payload": '{"customer": 7}'}, follow_redirects=False)
    assert response.status_code == 303, response.text
    message = parse_qs(urlsplit(response.headers["location"]).query)["msg"][0]
    assert "1 refused" in message and "limit_key" in message and "TypeError" in message, message
    assert _state(engine, models, queue, job_id) == before
