"""Archiving: exactly the terminal jobs older than the delay move, whole, and every read sees them the same."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from support.archives import Add, archived_row, backdate, partition_names, places
from support.queues import drain
from support.workers import enqueue

from venturi_sa import Die, InvalidTransition, JobContext, JobNotCompleted, Queue, Task

HOUR = timedelta(hours=1)



class Hopeless(Task):
    KIND = "hopeless"

    def run(self, ctx: JobContext) -> Die:
        return Die("no such customer")


@pytest.fixture
def queue(models: Any) -> Queue:
    return Queue(models, [Add, Hopeless], archive_after=None)


def reads(queue: Queue, engine: sa.Engine, job_id: str) -> tuple[Any, ...]:
    """Everything the operations say about one job."""
    try:
        result: Any = queue.result(engine, job_id)
    except JobNotCompleted as exc:
        result = ("not completed", exc.status)
    return queue.get_job(engine, job_id), queue.journal(engine, job_id), result


def listing(queue: Queue, engine: sa.Engine, **filters: Any) -> list[str]:
    """Every history page of ``filters``, 3 jobs a page, concatenated."""
    ids: list[str] = []
    page = queue.history(engine, limit=3, **filters)
    while True:
        ids += [job.id for job in page.items]
        if page.next_cursor is None:
            return ids
        page = queue.history(engine, limit=3, cursor=page.next_cursor, **filters)


def test_only_terminal_jobs_older_than_the_delay_move_and_reads_are_unchanged(
        engine: sa.Engine, models: Any, queue: Queue) -> None:
    done = enqueue(engine, queue, Add(a=1, b=2), Add(a=2, b=3), Add(a=3, b=4))
    [dead, owed] = enqueue(engine, queue, Hopeless(), Hopeless(), timeout=timedelta(seconds=30))
    [fresh] = enqueue(engine, queue, Add(a=9, b=9))
    drain(queue, engine)
    [waiting] = enqueue(engine, queue, Add(a=0, b=0), delay=timedelta(hours=2))
    old = [*done, dead, owed]
    backdate(engine, models, old, "2 hours")
    carrier = {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
    with engine.begin() as conn:
        conn.execute(sa.insert(models.traces_table).values(job_id=done[0], carrier=carrier))
        conn.execute(sa.insert(models.on_dead_table).values(job_id=owed, kind="hopeless", run_no=1, actor="test"))
    everyone = [*old, fresh, waiting]
    before = {job_id: reads(queue, engine, job_id) for job_id in everyone}
    history_before = listing(queue, engine)
    stats_before = queue.stats(engine)

    assert queue.archive(engine, older_than=HOUR) == 4  # done (3) and dead; owed waits for its on_dead call

    live, archived, entries = places(engine, models)
    assert live == {owed, fresh, waiting}
    assert sorted(archived) == sorted([*done, dead])
    assert not set(archived) & set(entries)  # their journal rows left with them
    assert {job_id: reads(queue, engine, job_id) for job_id in everyone} == before
    assert listing(queue, engine) == history_before
    assert listing(queue, engine, status="completed") == [j for j in history_before if j in {*done, fresh}]
    assert listing(queue, engine, status="pending") == [waiting]
    after = queue.stats(engine)
    assert (after.by_status, after.by_kind) == (stats_before.by_status, stats_before.by_kind)
    row = archived_row(engine, models, done[0])
    assert row.trace == carrier and row.timeout is None and len(row.journal) == 1
    assert archived_row(engine, models, dead).timeout == timedelta(seconds=30)
    assert len(partition_names(engine, models)) == 2  # today and tomorrow

    assert queue.archive(engine, older_than=HOUR) == 0  # idempotent: nothing left to move
    assert queue.explain(engine, done[0]).codes == ["completed"]
    assert queue.explain(engine, dead).codes == ["dead"]
    with pytest.raises(InvalidTransition, match="already completed"):
        queue.cancel(engine, done[1])
    with pytest.raises(InvalidTransition, match="dead"):
        queue.kill(engine, dead)


def test_requeue_moves_an_archived_dead_job_back_and_runs_it_again(
        engine: sa.Engine, models: Any, queue: Queue) -> None:
    [dead] = enqueue(engine, queue, Hopeless(), timeout=timedelta(seconds=30))
    drain(queue, engine)
    old_journal = queue.journal(engine, dead)
    assert queue.archive(engine) == 1
    requeued = queue.requeue(engine, dead, note="customer found")
    assert (requeued.status, requeued.failure_count) == ("pending", 0)
    live, archived, _ = places(engine, models)
    assert live == {dead} and archived == []
    assert queue.get_job(engine, dead).timeout == timedelta(seconds=30)  # its own limit came back
    entries = queue.journal(engine, dead)
    assert entries[:len(old_journal)] == old_journal  # ids kept
    assert entries[-1].note == "requeued by operator: customer found"
    drain(queue, engine)
    assert queue.get_job(engine, dead).run_count == 2


def test_requeue_of_an_archived_completed_job_is_refused(engine: sa.Engine, models: Any, queue: Queue) -> None:
    [done] = enqueue(engine, queue, Add(a=1, b=1))
    drain(queue, engine)
    queue.archive(engine)
    with pytest.raises(InvalidTransition, match="it is completed"):
        queue.requeue(engine, done)
    assert places(engine, models)[1] == [done]  # still archived
