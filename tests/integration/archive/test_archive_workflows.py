"""Workflows across the archive: parents' results read from it, a dependent's links kept by it and put back."""

from __future__ import annotations

import asyncio
import threading
from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from marshmallow import Schema, fields
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.orm import Session
from support.archives import places
from support.async_engines import async_engine_fixture  # noqa: F401 - the async_engine fixture
from support.queues import drain
from support.waiting import WAIT, wait_until
from support.workers import enqueue

from venturi_sa import Die, JobContext, Queue, Task
from venturi_sa.owed_calls import make_owed_calls
from venturi_sa.states import Outcome
from venturi_sa.storage import claim as claims
from venturi_sa.storage import outcomes
from venturi_sa.storage import owed_calls as owed_rows
from venturi_sa.storage.params import ClaimParams, FinishManyParams, FinishParams

fail_once: set[int] = set()
seen: list[list[tuple[str, str | None, Any, str | None]]] = []


@pytest.fixture(autouse=True)
def _reset() -> None:
    fail_once.clear()
    seen.clear()


class Number(Schema):
    n = fields.Integer(required=True)


class Part(Task):
    """Returns ``n``; dies (once) when ``n`` is in ``fail_once``."""

    KIND = "part"
    Payload = Number

    def run(self, ctx: JobContext) -> Any:
        if self.payload["n"] in fail_once:
            fail_once.discard(self.payload["n"])
            return Die(f"part {self.payload['n']} failed")
        return self.payload["n"]


class Total(Task):
    """The fan-in: the sum of its parents' results (a dead parent's is None)."""

    KIND = "total"

    def run(self, ctx: JobContext) -> Any:
        seen.append([(p.id, p.status, p.result, p.note) for p in ctx.parents])
        return sum(p.result or 0 for p in ctx.parents)


class AsyncTotal(Task):
    """:class:`Total` as an ``async def`` handler."""

    KIND = "async_total"

    async def run(self, ctx: JobContext) -> Any:
        return sum(p.result or 0 for p in await ctx.parents_async())


@pytest.fixture
def queue(models: Any) -> Queue:
    return Queue(models, [Part, Total, AsyncTotal], archive_after=None)


def links(engine: sa.Engine, models: Any, job_id: str) -> tuple[list[tuple[Any, ...]], tuple[Any, ...] | None]:
    """The dependent's ``_parents`` rows and its ``_waits`` row, as the live tables hold them."""
    p, w = models.workflow.parents_table, models.workflow.waits_table
    with engine.connect() as conn:
        rows = conn.execute(sa.select(p.c.position, p.c.parent_id, p.c.policy, p.c.done)
                            .where(p.c.job_id == job_id).order_by(p.c.position)).all()
        wait = conn.execute(sa.select(w.c.remaining, w.c.not_before, w.c.killed_by)
                            .where(w.c.job_id == job_id)).first()
    return [tuple(r) for r in rows], None if wait is None else tuple(wait)


def settle_owed(engine: sa.Engine, models: Any, queue: Queue) -> None:
    """What a worker of ``total`` does with the owed ``on_dead`` row of a killed fan-in (it has no hook)."""
    with Session(engine) as session, session.begin():
        make_owed_calls(session, models, queue.registry, kinds=["total"])


def test_a_fan_in_reads_the_results_and_notes_of_archived_parents(
        engine: sa.Engine, models: Any, queue: Queue) -> None:
    parts = enqueue(engine, queue, Part(n=10), Part(n=20), Part(n=30))
    drain(queue, engine)
    assert queue.archive(engine) == 3
    assert sorted(places(engine, models)[1]) == sorted(parts)

    [total] = enqueue(engine, queue, Total(), after=parts)  # its parents are archived: it runs at once
    drain(queue, engine)
    assert queue.result(engine, total) == 60
    assert [(i, s, r) for i, s, r, _ in seen[0]] == [(parts[0], "completed", 10), (parts[1], "completed", 20),
                                                     (parts[2], "completed", 30)]
    read = queue.parents(engine, total)
    assert [(p.id, p.status, p.result) for p in read] == [(i, s, r) for i, s, r, _ in seen[0]]
    assert [p.result for p in read] == [queue.result(engine, p) for p in parts]  # the same source


def test_async_reads_of_archived_parents(engine: sa.Engine, models: Any, queue: Queue,
                                         async_engine: AsyncEngine) -> None:
    parts = enqueue(engine, queue, Part(n=10), Part(n=20), Part(n=30))
    drain(queue, engine)
    assert queue.archive(engine) == 3
    [total] = enqueue(engine, queue, AsyncTotal(), after=parts)
    drain(queue, engine)
    assert queue.result(engine, total) == 60
    read = asyncio.run(queue.parents_async(async_engine, total))
    assert [(p.id, p.result) for p in read] == list(zip(parts, [10, 20, 30], strict=True))


def test_a_repaired_fan_in_reads_the_parents_archived_while_it_was_dead(
        engine: sa.Engine, models: Any, queue: Queue) -> None:
    fail_once.add(600)
    parts = enqueue(engine, queue, Part(n=10), Part(n=20), Part(n=30), Part(n=600))
    [total] = enqueue(engine, queue, Total(), after=parts)
    drain(queue, engine)
    assert queue.get_job(engine, total).status == "dead"
    assert queue.archive(engine) == 4  # the three completed parents and the dead one; the fan-in's call is owed
    read = queue.parents(engine, total)  # every parent archived: read from the archive

    queue.requeue(engine, parts[3], with_dependents=True)
    drain(queue, engine)
    assert queue.result(engine, total) == 660
    assert [r for _, _, r, _ in seen[-1]] == [10, 20, 30, 600]
    assert [(p.status, p.result, p.note) for p in read][2:] == [("completed", 30, None),
                                                                ("dead", None, "part 600 failed")]


def test_an_archived_dead_dependent_keeps_its_links(engine: sa.Engine, models: Any, queue: Queue) -> None:
    fail_once.add(600)
    parts = enqueue(engine, queue, Part(n=10), Part(n=20), Part(n=30), Part(n=600))
    [total] = enqueue(engine, queue, Total(), after=parts)
    drain(queue, engine)
    before = links(engine, models, total)
    assert before[1] is not None and before[1][2] == parts[3]  # killed by its dead parent
    settle_owed(engine, models, queue)
    assert queue.archive(engine) == 5
    assert sorted(places(engine, models)[1]) == sorted([*parts, total])
    assert links(engine, models, total) == ([], None)  # the cascade took the live rows

    read = queue.parents(engine, total)  # read from the archive row
    assert [(p.id, p.status, p.result) for p in read] == [
        (parts[0], "completed", 10), (parts[1], "completed", 20), (parts[2], "completed", 30),
        (parts[3], "dead", None)]

    queue.requeue(engine, total, note="run it without the dead part")  # moved back, with its links
    after = links(engine, models, total)
    assert after[0] == before[0]
    assert after[1] is not None and after[1][:2] == before[1][:2]
    drain(queue, engine)
    assert [p for p, _, _, _ in seen[-1]] == parts
    assert queue.result(engine, total) == 60


def test_requeue_with_dependents_revives_an_archived_dependent(
        engine: sa.Engine, models: Any, queue: Queue) -> None:
    fail_once.add(600)
    parts = enqueue(engine, queue, Part(n=10), Part(n=20), Part(n=30), Part(n=600))
    [total] = enqueue(engine, queue, Total(), after=parts)
    drain(queue, engine)
    settle_owed(engine, models, queue)
    assert queue.archive(engine) == 5

    revived = queue.requeue(engine, parts[3], with_dependents=True)
    assert revived.status == "pending"
    assert queue.get_job(engine, total).status == "pending"  # moved back and waiting for its parent again
    assert [d.id for d in queue.dependents(engine, parts[3])] == [total]
    wait = links(engine, models, total)[1]
    assert wait is not None and (wait[0], wait[2]) == (1, None)
    drain(queue, engine)
    assert queue.result(engine, total) == 660
    assert places(engine, models)[1].count(total) == 0


def test_a_dependent_archived_before_its_last_parent_ended_counts_it_when_moved_back(
        engine: sa.Engine, models: Any, queue: Queue) -> None:
    fail_once.add(600)
    [dying] = enqueue(engine, queue, Part(n=600))
    with Session(engine) as session, session.begin():  # a parent that is still pending when the fan-in dies
        slow = queue.enqueue(session, Part(n=5), delay=timedelta(hours=1)).id
    [total] = enqueue(engine, queue, Total(), after=[dying, slow])
    drain(queue, engine)
    assert queue.get_job(engine, total).status == "dead"
    settle_owed(engine, models, queue)
    assert queue.archive(engine) == 2  # the dead parent and the fan-in; the pending parent stays
    assert links(engine, models, total)[1] is None

    queue.retry_now(engine, slow)
    drain(queue, engine)  # the parent ends while its dependent is archived: no live link to count
    assert queue.get_job(engine, slow).status == "completed"
    queue.requeue(engine, total)  # moved back: the parent that ended since counts as done
    wait = links(engine, models, total)[1]
    assert wait is not None and wait[0] == 0
    drain(queue, engine)
    assert queue.result(engine, total) == 5


def test_requeue_with_dependents_moves_back_a_large_killed_fan_out_beside_a_backlog(
        engine: sa.Engine, models: Any, queue: Queue) -> None:
    fail_once.add(600)
    [parent] = enqueue(engine, queue, Part(n=600))
    enqueue(engine, queue, *[Part(n=-n) for n in range(1, 3001)])  # a backlog of archived dead jobs
    fail_once.update(-n for n in range(1, 3001))
    killed = enqueue(engine, queue, *[Total() for _ in range(1000)], after=[parent])
    drain(queue, engine)
    with Session(engine) as s, s.begin():  # a worker of the kind deletes the owed rows (no on_dead)
        assert owed_rows.discard(models, s, ["total"]) == 1000
    assert queue.archive(engine, batch_size=2000) == 1 + 3000 + 1000

    queue.requeue(engine, parent, with_dependents=True)
    live, archived, _ = places(engine, models)
    assert set(killed) <= live and len(archived) == 3000  # the backlog stays archived
    drain(queue, engine)
    assert {queue.result(engine, k) for k in killed} == {600}


def blocked(engine: sa.Engine) -> int:
    with engine.connect() as conn:
        return int(conn.execute(sa.text(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
            "AND datname = current_database()")).scalar_one())


def test_a_parent_ending_while_its_dependent_moves_back_is_counted_once(
        engine: sa.Engine, models: Any, queue: Queue) -> None:
    fail_once.add(600)
    [dying] = enqueue(engine, queue, Part(n=600))
    [running] = enqueue(engine, queue, Part(n=5), delay=timedelta(hours=1))
    [total] = enqueue(engine, queue, Total(), after=[dying, running])
    drain(queue, engine)
    settle_owed(engine, models, queue)
    assert queue.archive(engine) == 2  # the dead parent and the fan-in it killed
    queue.retry_now(engine, running)
    with Session(engine) as s, s.begin():
        [claimed] = claims.claim(models, s, ClaimParams(worker_id="w:1", kinds=["part"], limit=1, leases={},
                                                        default_lease=timedelta(minutes=5)))
    requeued: list[Any] = []
    with Session(engine) as ending:  # the parent's outcome, written and not yet committed
        ending.begin()
        outcomes.finish_many(models, ending, FinishManyParams(outcomes=[
            FinishParams(fence=claimed.fence, outcome=Outcome.COMPLETED, attachment=5)]))
        mover = threading.Thread(target=lambda: requeued.append(queue.requeue(engine, total)))
        mover.start()
        wait_until(lambda: blocked(engine) or not mover.is_alive(), what="the requeue waiting on the parent's row")
        ending.commit()
    mover.join(WAIT)
    assert requeued and requeued[0].status == "pending"
    wait = links(engine, models, total)[1]
    assert wait is not None and wait[0] == 0  # the parent that ended meanwhile is counted, exactly once
    drain(queue, engine)
    assert queue.result(engine, total) == 5
