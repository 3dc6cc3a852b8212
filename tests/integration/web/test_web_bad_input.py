"""Every bad input of docs/dashboard.md's table gets its status and message, never a 500, and changes nothing."""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa
from starlette.testclient import TestClient
from support.web import csrf_of, free_port, msg_of

from venturi_sa import Queue, Task
from venturi_sa.web import create_app


class Pending(Task):
    KIND = "k_pending"

    def run(self, ctx: Any) -> None:
        return None


def _rows(engine: sa.Engine, models: Any) -> list[tuple[Any, ...]]:
    job, entry = models.jobs_table, models.journal_table
    with engine.connect() as conn:
        jobs = [tuple(r) for r in conn.execute(sa.select(job).order_by(job.c.id))]
        return jobs + [tuple(r) for r in conn.execute(sa.select(entry).order_by(entry.c.id))]


@pytest.fixture
def editing(engine: sa.Engine, models: Any) -> Any:
    app = create_app(engine, models.prefix, listen=False, tasks=[Pending])
    with TestClient(app, raise_server_exceptions=False) as client:
        yield client
    app.state.dashboard.feed.close()


NUL = "a\x00b"


@pytest.mark.parametrize("field", ["q", "kind", "status", "window", "upto", "after"])
@pytest.mark.parametrize("path", ["/jobs", "/fragment/jobs"])
def test_a_nul_byte_in_a_filter_is_400(editing: TestClient, seeded: dict[str, list[str]], path: str,
                                       field: str) -> None:
    response = editing.get(path, params={field: NUL})
    assert response.status_code == 400, response.text
    assert f"{field} must be printable text" in response.text


@pytest.mark.parametrize("path", ["/jobs/{}", "/fragment/jobs/{}", "/jobs/{}/json/payload"])
def test_a_bad_job_id_is_400_and_an_unknown_one_404(editing: TestClient, seeded: dict[str, list[str]],
                                                    path: str) -> None:
    for bad in (NUL, "x" * 129, "tab\there"):
        response = editing.get(path.format(bad.replace("\x00", "%00").replace("\t", "%09")))
        assert response.status_code == 400 and "invalid job id" in response.text, (bad, response.text)
    unknown = editing.get(path.format("01NOSUCHJOB0000000000000000"))
    assert unknown.status_code == 404 and "no job with id" in unknown.text


def test_a_bulk_action_with_one_bad_id_changes_nothing(editing: TestClient, engine: sa.Engine, models: Any,
                                                       seeded: dict[str, list[str]]) -> None:
    before = _rows(engine, models)
    token = csrf_of(editing.get("/jobs").text)
    for do, ids in (("requeue:selected", [*seeded["dead"], NUL]), ("kill:selected", [seeded["pending"][0], NUL])):
        response = editing.post("/actions", data={"csrf": token, "do": do, "ids": ids}, follow_redirects=False)
        assert response.status_code == 400 and "invalid job id" in response.text
    assert _rows(engine, models) == before


def test_an_unknown_id_in_a_bulk_action_is_reported_and_the_rest_proceed(
        editing: TestClient, engine: sa.Engine, models: Any, seeded: dict[str, list[str]]) -> None:
    token = csrf_of(editing.get("/jobs").text)
    response = editing.post("/actions", data={"csrf": token, "do": "requeue:selected",
                                              "ids": [seeded["dead"][0], "01NOSUCHJOB0000000000000000"]})
    assert response.status_code == 200
    assert msg_of(response.text) == ("Requeue: 1 job(s) changed; 1 refused: no job with id "
                                     "01NOSUCHJOB0000000000000000")
    assert Queue(models).get_job(engine, seeded["dead"][0]).status == "pending"


def _edit(client: TestClient, job_id: str, **form: str) -> Any:
    token = csrf_of(client.get(f"/jobs/{job_id}").text)
    return client.post("/actions", data={"csrf": token, "ids": job_id, **form}, follow_redirects=False)


@pytest.mark.parametrize(("form", "message"), [
    ({"do": "edit_payload:selected", "payload": "[" * 60_000 + "]" * 60_000},
     "payload must be at most 100000 characters"),
    ({"do": "edit_payload:selected", "payload": "[" * 30_000 + "]" * 30_000},
     "payload nests deeper than 64 levels"),
    ({"do": "edit_payload:selected", "payload": '{"a":' * 65 + "1" + "}" * 65}, "payload nests deeper than 64"),
    ({"do": "edit_payload:selected", "payload": "1" * 5000}, "payload is not usable JSON"),
    ({"do": "run_later:selected", "run_at": "99999999999d"}, "run_at must be at most 3650 days ahead"),
    ({"do": "run_later:selected", "run_at": "999999999w"}, "run_at must be at most 3650 days ahead"),
    ({"do": "run_later:selected", "run_at": "9999-12-31T23:59:59Z"}, "run_at must be at most 3650 days ahead"),
    ({"do": "run_later:selected", "run_at": "0001-01-01T00:00:00Z"}, "run_at must be at most 3650 days ahead"),
    ({"do": "run_later:selected", "run_at": "3651d"}, "run_at must be at most 3650 days ahead"),
])
def test_bad_action_values_are_400_with_the_reason(editing: TestClient, engine: sa.Engine, models: Any,
                                                  seeded: dict[str, list[str]], form: dict[str, str],
                                                  message: str) -> None:
    before = _rows(engine, models)
    response = _edit(editing, seeded["pending"][0], **form)
    assert response.status_code == 400, response.text[:300]
    assert message in response.text
    assert _rows(engine, models) == before


def test_a_pause_until_far_away_is_400(editing: TestClient, seeded: dict[str, list[str]]) -> None:
    token = csrf_of(editing.get("/schedules").text)
    response = editing.post("/schedules", data={"csrf": token, "do": "pause_kind", "kind": "k", "until": "99999999d"})
    assert response.status_code == 400 and "until must be at most 3650 days ahead" in response.text


def test_a_body_over_the_bound_is_413_before_it_is_parsed(editing: TestClient, engine: sa.Engine, models: Any,
                                                          seeded: dict[str, list[str]]) -> None:
    before = _rows(engine, models)
    token = csrf_of(editing.get("/jobs").text)
    big = {"csrf": token, "do": "requeue:selected", "ids": seeded["dead"], "note": "x" * (1024 * 1024)}
    declared = editing.post("/actions", data=big)
    assert declared.status_code == 413 and "request body over 1048576 bytes" in declared.text

    def chunks() -> Any:  # no Content-Length: counted as it is read
        yield f"csrf={token}&do=requeue%3Aselected&ids={seeded['dead'][0]}&note=".encode()
        for _ in range(20):
            yield b"y" * 100_000

    streamed = editing.post("/actions", content=chunks(),
                            headers={"content-type": "application/x-www-form-urlencoded"})
    assert streamed.status_code == 413 and "request body over" in streamed.text
    assert _rows(engine, models) == before


def test_an_unreachable_database_is_a_503_page_that_retries(models: Any) -> None:
    gone = sa.create_engine(f"postgresql+psycopg2://nobody@127.0.0.1:{free_port()}/none",
                            connect_args={"connect_timeout": 2})
    app = create_app(gone, models.prefix, listen=False)
    with TestClient(app, raise_server_exceptions=False) as client:
        for path in ("/", "/jobs", "/jobs/01NOSUCHJOB0000000000000000", "/workers", "/schedules",
                     "/fragment/overview"):
            response = client.get(path)
            assert response.status_code == 503, (path, response.text[:300])
            assert response.headers["retry-after"] == "5"
            assert 'http-equiv="refresh" content="5"' in response.text and 'id="unavailable"' in response.text
    gone.dispose()
