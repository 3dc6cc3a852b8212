"""docs/security.md's least-privilege roles, created by the page's own SQL in the test's cluster and used for real.

The producer enqueues and may not delete; a worker running as the worker role runs the jobs to completion;
the operator kills, requeues and pauses through the operations and the dashboard; the viewer's dashboard
shows every page, draws no button, and each action it is sent fails cleanly (403, or a results line) with
nothing changed.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.orm import Session
from starlette.testclient import TestClient
from support.docblocks import fenced
from support.paths import DOCS
from support.waiting import Events
from support.web import confirmed, csrf_of, msg_of, seed
from support.workers import running

from venturi_sa import Complete, JobContext, Queue, Task, Worker
from venturi_sa.web import create_app

PAGE = DOCS / "security.md"
ROLES = ("worker", "producer", "operator", "viewer")


class Note(Task):
    KIND = "note"

    def run(self, ctx: JobContext) -> Complete:
        return Complete("noted")


class Unique(Task):
    KIND = "unique"

    def dedup_key(self) -> str:
        return "the-one"

    def run(self, ctx: JobContext) -> Complete:
        return Complete("done")


@pytest.fixture
def roles(pg_url: str, engine: sa.Engine, models: Any) -> Iterator[dict[str, sa.Engine]]:
    """The page's roles for this test's queue (its SQL blocks, ``shop`` read as the prefix); an engine each."""
    blocks = fenced(PAGE, "sql")
    assert len(blocks) == 2 and "CREATE ROLE" in blocks[0] and "GRANT" in blocks[1]
    tag = uuid.uuid4().hex[:8]
    as_test = [re.sub(r"\bshop(?=_|\\_)", models.prefix, b).replace("-secret'", f"-{tag}'") for b in blocks]
    with engine.begin() as conn:
        for block in as_test:
            conn.exec_driver_sql(block.replace("%", "%%"))
    engines = {role: sa.create_engine(sa.make_url(pg_url).set(username=f"{models.prefix}_{role}",
                                                              password=f"{role}-{tag}"),
                                      connect_args={"options": "-c timezone=UTC"})
               for role in ROLES}
    try:
        yield engines
    finally:
        for role_engine in engines.values():
            role_engine.dispose()
        with engine.begin() as conn:
            for role in ROLES:
                conn.exec_driver_sql(f"DROP OWNED BY {models.prefix}_{role}")
                conn.exec_driver_sql(f"DROP ROLE {models.prefix}_{role}")


def _denied(error: BaseException) -> bool:
    return getattr(getattr(error, "orig", None), "pgcode", None) == "42501"


@pytest.mark.timeout(120)
def test_each_documented_role_does_its_part_and_no_more(roles: dict[str, sa.Engine], engine: sa.Engine,
                                                        models: Any) -> None:
    queue = Queue(models, [Note, Unique], archive_after=None)
    with Session(roles["producer"]) as session, session.begin():  # the producer enqueues ...
        first = queue.enqueue(session, Note()).id
        later = queue.enqueue(session, Note(), delay=timedelta(hours=1)).id
        child = queue.enqueue(session, Note(), after=[first]).id
    for _ in range(2):
        with Session(roles["producer"]) as session, session.begin():
            unique = queue.enqueue(session, Unique()).id
    with pytest.raises(sa.exc.ProgrammingError) as refused, roles["producer"].begin() as conn:
        conn.exec_driver_sql(f"DELETE FROM {models.prefix}_jobs")  # ... and may not delete
    assert _denied(refused.value)

    events = Events()  # the worker role runs them
    with running(Worker(queue, roles["worker"], poll_interval=0.1, listen=True, on_event=events)):
        for job_id in (first, child, unique):
            events.wait_for("finished", job_id=job_id)
    assert {queue.get_job(engine, i).status for i in (first, child, unique)} == {"completed"}

    operator = roles["operator"]  # the operator acts
    assert queue.kill(operator, later, "not needed", actor="ops").status == "dead"
    assert queue.requeue(operator, later, "needed after all", actor="ops").status == "pending"
    queue.pause(operator, "note", reason="maintenance", actor="ops")
    queue.resume(operator, "note", actor="ops")
    app = create_app(operator, models.prefix, listen=False)
    with TestClient(app) as client:
        token = csrf_of(client.get("/jobs").text)
        asked = client.post("/actions", data={"csrf": token, "do": "kill:selected", "ids": [later]})
        assert msg_of(confirmed(client, asked).text) == "Kill: 1 job(s) changed"
    app.state.dashboard.feed.close()
    assert queue.get_job(engine, later).status == "dead"

    with pytest.raises(sa.exc.ProgrammingError) as refused, roles["viewer"].begin() as conn:
        conn.exec_driver_sql(f"UPDATE {models.prefix}_jobs SET priority = 0")
    assert _denied(refused.value)


@pytest.mark.timeout(120)
def test_a_dashboard_on_the_viewer_role_shows_everything_and_changes_nothing(
        roles: dict[str, sa.Engine], engine: sa.Engine, models: Any) -> None:
    queue = Queue(models)
    seeded = seed(engine, models)
    dead, pending = seeded["dead"][0], seeded["pending"][0]
    app = create_app(roles["viewer"], models.prefix, listen=False)
    with TestClient(app) as client:
        for path in ("/", "/jobs", f"/jobs/{dead}", f"/jobs/{pending}", "/workers", "/schedules",
                     "/fragment/jobs", f"/jobs/{dead}/json/payload"):
            assert client.get(path).status_code == 200, path
        token = csrf_of(client.get("/jobs").text)
        requeue = client.post("/actions", data={"csrf": token, "do": "requeue:selected", "ids": [dead]})
        assert requeue.status_code == 200 and "permission denied" in msg_of(requeue.text), requeue.text[:300]
        asked = client.post("/actions", data={"csrf": token, "do": "kill:selected", "ids": [pending]})
        killed = confirmed(client, asked)
        assert killed.status_code == 200 and "permission denied" in msg_of(killed.text)
        paused = client.post("/schedules", data={"csrf": token, "do": "pause_kind", "kind": "k_pending"})
        assert paused.status_code == 403 and "may not do this" in paused.text, paused.text[:300]
    app.state.dashboard.feed.close()
    assert queue.get_job(engine, dead).status == "dead" and queue.get_job(engine, pending).status == "pending"
    assert queue.pauses(engine) == []
