"""Enqueue decides every merge before it writes anything (defect #12).

A failing ``merge()`` or a merged payload failing its schema, anywhere in an
``enqueue_many`` call, leaves the caller's session as it was; later tasks of a
key see the payload the earlier ones merged, whatever the session's autoflush.
"""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa
from marshmallow import Schema, fields
from sqlalchemy.orm import Session
from support.queues import count
from support.workers import enqueue, job_row, journal

from venturi_sa import Coalesce, InvalidPayload, JobContext, Queue, Task
from venturi_sa.models import JobBase


class Reasons(Schema):
    account = fields.Integer(required=True)
    reasons = fields.List(fields.String(), load_default=list)


class Collect(Task):
    """Coalesces by appending reasons; some reasons make ``merge`` misbehave."""

    KIND = "collect"
    Payload = Reasons

    def dedup_key(self) -> str:
        return f"account:{self.payload['account']}"

    def merge(self, existing: JobBase) -> Coalesce:
        reasons = self.payload["reasons"]
        if "raise" in reasons:
            raise RuntimeError("merge refused")
        if "mutate-then-raise" in reasons:
            existing.payload["reasons"].append("mutated")  # in place, on whatever it was given
            raise RuntimeError("merge refused after mutating")
        if "bad-payload" in reasons:
            return Coalesce({**existing.payload, "account": "not a number"})
        return Coalesce({**existing.payload, "reasons": existing.payload["reasons"] + reasons})

    def run(self, ctx: JobContext) -> None:
        pass


@pytest.fixture
def queue(models: Any) -> Queue:
    return Queue(models, [Collect])


FAILURES = [("raise", RuntimeError), ("mutate-then-raise", RuntimeError), ("bad-payload", InvalidPayload)]


@pytest.mark.parametrize(("failure", "error"), FAILURES, ids=[f[0] for f in FAILURES])
def test_a_failed_merge_leaves_the_session_as_it_was(engine: sa.Engine, models: Any, queue: Queue,
                                                     failure: str, error: type[Exception]) -> None:
    [existing] = enqueue(engine, queue, Collect(account=1, reasons=["x"]))
    with Session(engine) as session:
        tasks = [Collect(account=2, reasons=["new"]), Collect(account=1, reasons=["y"]),
                 Collect(account=1, reasons=[failure])]
        with pytest.raises(error):
            queue.enqueue_many(session, tasks)
        assert not session.new and not session.dirty
        for obj in list(session.identity_map.values()):  # the loaded target is unchanged, even in memory
            assert obj.payload == {"account": 1, "reasons": ["x"]}
        session.commit()
    assert job_row(engine, models, existing).payload == {"account": 1, "reasons": ["x"]}
    assert count(engine, models.jobs_table) == 1 and count(engine, models.journal_table) == 0


@pytest.mark.parametrize("autoflush", [True, False])
def test_coalescing_tasks_of_one_key_in_one_call_all_merge(engine: sa.Engine, models: Any, queue: Queue,
                                                           autoflush: bool) -> None:
    [existing] = enqueue(engine, queue, Collect(account=1, reasons=["x"]))
    with Session(engine, autoflush=autoflush) as session, session.begin():
        jobs = queue.enqueue_many(session, [Collect(account=1, reasons=["y"]), Collect(account=1, reasons=["z"])])
        assert [job.id for job in jobs] == [existing, existing]
    assert job_row(engine, models, existing).payload == {"account": 1, "reasons": ["x", "y", "z"]}
    assert [(e.outcome, e.run_no) for e in journal(engine, models, existing)] == [("merged", 0), ("merged", 0)]


def test_merges_into_a_job_new_in_the_same_call_are_in_its_insert(engine: sa.Engine, models: Any,
                                                                    queue: Queue) -> None:
    with Session(engine, autoflush=False) as session, session.begin():
        jobs = queue.enqueue_many(session, [Collect(account=1, reasons=[r]) for r in "abc"])
        ids = {job.id for job in jobs}
    assert len(ids) == 1
    row = job_row(engine, models, ids.pop())
    assert row.payload == {"account": 1, "reasons": ["a", "b", "c"]} and row.dedup_key == "account:1"
    assert [e.outcome for e in journal(engine, models, row.id)] == ["merged", "merged"]
