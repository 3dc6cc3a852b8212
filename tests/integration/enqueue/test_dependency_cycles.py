"""Dependency cycles are refused at flush, whatever built the rows: a job is never its own parent or ancestor.

Each path that can name a parent is tried: ``queue.job(after=...)`` with an
id given by hand (the job naming itself, or two jobs of one flush naming
each other), ``ParentLink`` rows added by hand, and ``enqueue``/
``enqueue_many`` with ``after=`` (fresh ids: their parents exist first).
Every refusal is ``DependencyCycle`` out of the flush, and after the
rollback nothing of that transaction is in the tables.
"""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa
from marshmallow import Schema, fields
from sqlalchemy.orm import Session

from venturi_sa import DependencyCycle, InvalidJobId, JobNotFound, Queue, Task
from venturi_sa.models.job_ids import new_job_id


class Node(Task):
    KIND = "cycle_node"

    class Payload(Schema):
        name = fields.String(required=True)

    def run(self, ctx: Any) -> None:
        return None


@pytest.fixture
def queue(models: Any) -> Queue:
    return Queue(models, [Node])


def _written(engine: sa.Engine, models: Any, ids: list[str]) -> tuple[int, int]:
    """How many of ``ids`` are jobs, and how many dependency rows they have."""
    with engine.connect() as conn:
        jobs = conn.execute(sa.select(sa.func.count()).select_from(models.jobs_table)
                            .where(models.jobs_table.c.id.in_(ids))).scalar_one()
        links = conn.execute(sa.select(sa.func.count()).select_from(models.workflow.parents_table)
                             .where(models.workflow.parents_table.c.job_id.in_(ids))).scalar_one()
    return jobs, links


def test_a_job_added_by_hand_naming_itself_as_its_parent_is_refused(engine: sa.Engine, models: Any,
                                                                    queue: Queue) -> None:
    own = new_job_id()
    with Session(engine) as session:
        job = queue.job(Node(name="self"), after=[own])
        job.id = own
        session.add(job)
        with pytest.raises(DependencyCycle, match=own):
            session.commit()
        session.rollback()
    assert _written(engine, models, [own]) == (0, 0)


def test_two_jobs_of_one_flush_naming_each_other_are_refused(engine: sa.Engine, models: Any, queue: Queue) -> None:
    a, b = new_job_id(), new_job_id()
    with Session(engine) as session:
        first, second = queue.job(Node(name="a"), after=[b]), queue.job(Node(name="b"), after=[a])
        first.id, second.id = a, b
        session.add_all([first, second])
        with pytest.raises(DependencyCycle, match="wait for itself"):
            session.flush()
        session.rollback()
    assert _written(engine, models, [a, b]) == (0, 0)


def test_a_chain_added_in_one_flush_is_accepted_and_can_be_cancelled_with_dependents(
        engine: sa.Engine, models: Any, queue: Queue) -> None:
    a, b = new_job_id(), new_job_id()
    with Session(engine) as session, session.begin():
        first, second = queue.job(Node(name="a")), queue.job(Node(name="b"), after=[a])
        first.id, second.id = a, b
        session.add_all([first, second])
    assert _written(engine, models, [a, b]) == (2, 1)
    queue.cancel(engine, a, with_dependents=True)
    assert {queue.get_job(engine, i).status for i in (a, b)} == {"dead"}


def test_parent_links_added_by_hand_that_close_a_cycle_are_refused(engine: sa.Engine, models: Any,
                                                                    queue: Queue) -> None:
    with Session(engine) as session, session.begin():
        a = queue.enqueue(session, Node(name="a"))
        b = queue.enqueue(session, Node(name="b"), after=[a])
        a_id, b_id = a.id, b.id
    link = models.workflow.ParentLink
    for job_id, parent_id in ((a_id, b_id), (a_id, a_id)):  # a waits for b, which waits for a; a for itself
        with Session(engine) as session:
            session.add(link(job_id=job_id, position=5, parent_id=parent_id, policy="cancel", done=False))
            with pytest.raises(DependencyCycle, match=a_id):
                session.commit()
            session.rollback()
    assert _written(engine, models, [a_id]) == (1, 0)
    assert [p.id for p in queue.parents(engine, b_id)] == [a_id]


def test_enqueue_with_after_takes_only_existing_parents_in_ulid_form(engine: sa.Engine, models: Any,
                                                                     queue: Queue) -> None:
    with Session(engine) as session:
        with pytest.raises(InvalidJobId, match="after= item"):
            queue.enqueue(session, Node(name="x"), after=["not-a-ulid"])
        with pytest.raises(InvalidJobId, match="after= item"):
            queue.enqueue_many(session, [Node(name="x"), Node(name="y")], after=["01HZZ\x00"])
        with pytest.raises(JobNotFound, match="parents must exist"):
            queue.enqueue_many(session, [Node(name="x")], after=[new_job_id()])
        session.rollback()
    with Session(engine) as session:
        parent = queue.enqueue(session, Node(name="p"))
        children = queue.enqueue_many(session, [Node(name="c1"), Node(name="c2")], after=[parent])
        session.commit()
        ids = [parent.id, *(c.id for c in children)]
    assert _written(engine, models, ids) == (3, 2)
    queue.cancel(engine, ids[0], with_dependents=True)
    assert {queue.get_job(engine, i).status for i in ids} == {"dead"}


def test_a_job_given_an_id_that_is_not_a_ulid_is_refused_at_flush(engine: sa.Engine, models: Any,
                                                                  queue: Queue) -> None:
    with Session(engine) as session:
        job = queue.job(Node(name="x"))
        job.id = "job-1"
        session.add(job)
        with pytest.raises(InvalidJobId, match="Job.id"):
            session.flush()
        session.rollback()
    assert _written(engine, models, ["job-1"]) == (0, 0)
