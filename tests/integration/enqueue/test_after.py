"""enqueue(..., after=[...]): dependents wait for their parents, released in the parents' terminal transactions."""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa
from marshmallow import Schema, fields
from sqlalchemy.orm import Session
from support.workers import job_row, journal

from venturi_sa import Die, InvalidOption, JobNotFound, Queue, Task
from venturi_sa.errors import UnsupportedIsolation
from venturi_sa.models.job_ids import new_job_id
from venturi_sa.testing import drain

RAN: list[str] = []


class Step(Schema):
    name = fields.String(required=True)
    fail = fields.Boolean(load_default=False)


class Work(Task):
    KIND = "work"
    Payload = Step

    def run(self, ctx: Any) -> Any:
        RAN.append(self.payload["name"])
        if self.payload["fail"]:
            return Die("failed on purpose")
        return {"name": self.payload["name"]}


GATHERED: list[Any] = []


class Gather(Task):
    KIND = "gather"
    Payload = Step

    def run(self, ctx: Any) -> Any:
        RAN.append(self.payload["name"])
        GATHERED.append([(p.id, p.status, p.result) for p in ctx.parents])
        assert [p.id for p in ctx.iter_parents(batch=2)] == [p.id for p in ctx.parents]
        return None


class Flaky(Task):
    KIND = "flaky"
    Payload = Step
    max_failures = 1

    def run(self, ctx: Any) -> Any:
        raise RuntimeError("always")


class Keyed(Task):
    KIND = "keyed"
    Payload = Step

    def dedup_key(self) -> str:
        return "k"


@pytest.fixture
def queue(models: Any) -> Queue:
    RAN.clear()
    GATHERED.clear()
    return Queue(models, [Work, Gather, Flaky, Keyed])


def _status(s: Session, queue: Queue, job_id: str) -> tuple[str, bool]:
    row = s.execute(sa.select(queue.models.Job.status, queue.models.Job.visible_at == sa.literal(
        "infinity", sa.DateTime(timezone=True))).where(queue.models.Job.id == job_id)).one()
    return row[0], row[1]


def test_a_chain_runs_in_order(session: Session, queue: Queue) -> None:
    a = queue.enqueue(session, Work(name="a"))
    b = queue.enqueue(session, Work(name="b"), after=[a])
    c = queue.enqueue(session, Work(name="c"), after=[b.id])
    assert _status(session, queue, b.id) == ("pending", True)
    assert _status(session, queue, c.id) == ("pending", True)
    drain(session, queue)
    assert RAN == ["a", "b", "c"]
    assert [_status(session, queue, j.id)[0] for j in (a, b, c)] == ["completed"] * 3


def test_fan_in_runs_once_after_every_parent_and_reads_their_results(session: Session, queue: Queue) -> None:
    parents = queue.enqueue_many(session, [Work(name=f"p{i}") for i in range(5)])
    [callback] = queue.enqueue_many(session, [Gather(name="callback")], after=list(reversed(parents)))
    drain(session, queue)
    assert RAN[-1] == "callback" and RAN.count("callback") == 1 and len(RAN) == 6
    assert GATHERED == [[(p.id, "completed", {"name": f"p{i}"}) for i, p in reversed(list(enumerate(parents)))]]


def test_cancel_policy_kills_the_dependent_and_its_own_dependents(session: Session, queue: Queue) -> None:
    a = queue.enqueue(session, Work(name="a", fail=True))
    b = queue.enqueue(session, Work(name="b"), after=[a])
    c = queue.enqueue(session, Work(name="c"), after=[b], if_parent_dead="run")
    d = queue.enqueue(session, Work(name="d"), after=[b])
    drain(session, queue)
    assert RAN == ["a", "c"]
    assert _status(session, queue, b.id)[0] == "dead"
    assert _status(session, queue, d.id)[0] == "dead"
    assert _status(session, queue, c.id)[0] == "completed"
    t = queue.models.journal_table
    note = session.execute(sa.select(t.c.note).where(t.c.job_id == b.id)).scalar_one()
    assert a.id in note and "ended dead" in note


def test_run_policy_runs_after_a_dead_parent(session: Session, queue: Queue) -> None:
    a = queue.enqueue(session, Work(name="a", fail=True))
    b = queue.enqueue(session, Work(name="b"))
    c = queue.enqueue(session, Work(name="c"), after=[a, b], if_parent_dead="run")
    drain(session, queue)
    assert sorted(RAN[:2]) == ["a", "b"] and RAN[2:] == ["c"]
    assert _status(session, queue, c.id)[0] == "completed"


def test_a_parent_already_terminal_is_honoured_at_once(session: Session, queue: Queue) -> None:
    a = queue.enqueue(session, Work(name="a"))
    dead = queue.enqueue(session, Work(name="x", fail=True))
    drain(session, queue)
    b = queue.enqueue(session, Work(name="b"), after=[a])
    assert _status(session, queue, b.id) == ("pending", False)
    c = queue.enqueue(session, Work(name="c"), after=[a, dead])
    assert _status(session, queue, c.id) == ("dead", False)
    t = queue.models.journal_table
    [(run_no, outcome, note)] = session.execute(sa.select(t.c.run_no, t.c.outcome, t.c.note)
                                                .where(t.c.job_id == c.id)).all()
    assert (run_no, outcome) == (0, "dead") and dead.id in note
    d = queue.enqueue(session, Work(name="d"), after=[dead], if_parent_dead="run")
    assert _status(session, queue, d.id) == ("pending", False)


def test_bad_after_items_raise_with_nothing_written(session: Session, queue: Queue, models: Any) -> None:
    a = queue.enqueue(session, Work(name="a"))
    before = session.execute(sa.select(sa.func.count()).select_from(models.jobs_table)).scalar_one()
    with pytest.raises(JobNotFound, match="nope"):
        queue.enqueue(session, Work(name="b"), after=[a, "nope"])
    with pytest.raises(InvalidOption, match="if_parent_dead"):
        queue.enqueue(session, Work(name="b"), after=[a], if_parent_dead="maybe")
    with pytest.raises(InvalidOption, match="list"):
        queue.enqueue(session, Work(name="b"), after=a.id)  # type: ignore[arg-type]
    with pytest.raises(InvalidOption, match="dedup key"):
        queue.enqueue(session, Keyed(name="b"), after=[a])
    after = session.execute(sa.select(sa.func.count()).select_from(models.jobs_table)).scalar_one()
    assert before == after


def test_duplicates_are_dropped_keeping_the_first_position(engine: sa.Engine, queue: Queue) -> None:
    from support.workers import enqueue
    a, b = enqueue(engine, queue, Work(name="a"), Work(name="b"))
    [c] = enqueue(engine, queue, Work(name="c"), after=[b, a, b, a])
    assert [p.id for p in queue.parents(engine, c)] == [b, a]
    assert [(d.id, d.if_parent_dead) for d in queue.dependents(engine, a)] == [(c, "cancel")]
    assert queue.explain(engine, c).reasons[0].text.startswith("waiting for 2 of 2 parents")


def test_after_needs_read_committed(engine: sa.Engine, queue: Queue) -> None:
    from support.workers import enqueue
    [a] = enqueue(engine, queue, Work(name="a"))
    with Session(engine.execution_options(isolation_level="REPEATABLE READ")) as s:
        with pytest.raises(UnsupportedIsolation, match="READ COMMITTED"):
            queue.enqueue(s, Work(name="b"), after=[a])


def test_rollback_leaves_no_job_and_no_dependency(engine: sa.Engine, queue: Queue, models: Any) -> None:
    from support.workers import enqueue
    [a] = enqueue(engine, queue, Work(name="a"))
    with Session(engine) as s:
        queue.enqueue(s, Work(name="b"), after=[a])
        s.rollback()
    with engine.connect() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(models.jobs_table)).scalar_one() == 1
        for table in (models.workflow.waits_table, models.workflow.parents_table):
            assert conn.execute(sa.select(sa.func.count()).select_from(table)).scalar_one() == 0
    assert job_row(engine, models, a).status == "pending" and journal(engine, models, a) == []


def test_a_waiting_job_reads_back_and_explains_itself(engine: sa.Engine, queue: Queue) -> None:
    from support.workers import enqueue
    a, b, c = enqueue(engine, queue, Work(name="a"), Work(name="b"), Work(name="c"))
    [d] = enqueue(engine, queue, Work(name="d"), after=[a, b, c])
    view = queue.get_job(engine, d)
    assert view.status == "pending"
    why = queue.explain(engine, d)
    assert why.codes[0] == "waiting_on_parents"
    assert "waiting for 3 of 3 parents" in why.reasons[0].text and a in why.reasons[0].text
    assert queue.stats(engine).waiting == 1


def test_queue_job_with_after_is_linked_by_its_flush(engine: sa.Engine, queue: Queue, models: Any) -> None:
    with Session(engine) as s, s.begin():
        a = queue.job(Work(name="a"))
        s.add(a)
        b = queue.job(Work(name="b"), after=[a])
        s.add(b)
        s.flush()
        assert b.status == "pending"
        b_id, a_id = b.id, a.id
    assert [p.id for p in queue.parents(engine, b_id)] == [a_id]
    assert queue.explain(engine, b_id).codes[0] == "waiting_on_parents"
    with Session(engine) as s:
        missing = new_job_id()
        s.add(queue.job(Work(name="c"), after=[missing]))
        with pytest.raises(JobNotFound, match=missing):
            s.flush()
        s.rollback()


def test_the_failure_backstop_and_an_undecodable_payload_apply_the_policy(session: Session, queue: Queue,
                                                                         models: Any) -> None:
    flaky = queue.enqueue(session, Flaky(name="f"))
    poison_id = new_job_id()  # an id given by hand (a ULID, as the flush requires)
    poison = models.Job(id=poison_id, kind="work", payload={"nope": 1}, status="pending", run_count=0,
                        failure_count=0, created_at=sa.func.now(), visible_at=sa.func.now())
    session.add(poison)
    session.flush()
    after_flaky = queue.enqueue(session, Work(name="a"), after=[flaky])
    after_poison = queue.enqueue(session, Work(name="b"), after=[poison_id], if_parent_dead="run")
    drain(session, queue, fail_fast=False)
    assert _status(session, queue, flaky.id)[0] == "dead" and _status(session, queue, poison_id)[0] == "dead"
    assert _status(session, queue, after_flaky.id)[0] == "dead"
    assert _status(session, queue, after_poison.id)[0] == "completed" and RAN == ["b"]
