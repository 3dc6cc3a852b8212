"""Conformance of the ``job_result`` verb: the status and the last ``completed`` run's attachment."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.orm import Session
from support.factories import factories_for

from venturi_sa import Models
from venturi_sa.storage import history as history_store
from venturi_sa.storage.history import JobParams
from venturi_sa.storage.params import Runner


@contextmanager
def opened(engine: sa.Engine, kind: str) -> Iterator[Runner]:
    if kind == "session":
        with Session(engine) as session, session.begin():
            yield session
    else:
        with engine.begin() as conn:
            yield conn


@pytest.mark.parametrize("runner_kind", ["session", "connection"])
def test_job_result_is_the_status_and_the_last_completed_attachment(
        engine: sa.Engine, models: Models, runner_kind: str) -> None:
    with Session(engine) as session:
        Job, Entry = factories_for(models, session)
        done = Job(completed=True, run_count=2)
        Entry(job=done, outcome="retried", note="boom", attachment={"try": 1}, run_no=1)
        Entry(job=done, outcome="completed", attachment={"sum": 3}, run_no=2)
        bare = Job(completed=True)
        Entry(job=bare, outcome="completed", attachment=None)
        waiting = Job(pending=True)
        ids = done.id, bare.id, waiting.id
        session.commit()
    with opened(engine, runner_kind) as r:
        rows: list[Any] = [history_store.fetch_result(models, r, JobParams(job_id=i)) for i in ids]
        missing = history_store.fetch_result(models, r, JobParams(job_id="01J00000000000000000000000"))
    assert missing is None
    assert [(row.status, row.result) for row in rows] == [("completed", {"sum": 3}), ("completed", None),
                                                          ("pending", None)]
