"""Archiving beside running workers, and a move killed half way: every job whole, in exactly one place."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.orm import Session
from support.archives import Add, places
from support.async_engines import async_engine_fixture  # noqa: F401 - the async_engine fixture
from support.waiting import WAIT, Events, wait_until
from support.workers import enqueue, running

from venturi_sa import Queue, Worker
from venturi_sa.storage import archive

N = 240



def walk(queue: Queue, engine: sa.Engine) -> list[str]:
    """One full history listing, 13 jobs a page."""
    ids: list[str] = []
    page = queue.history(engine, limit=13)
    while True:
        ids += [job.id for job in page.items]
        if page.next_cursor is None:
            return ids
        page = queue.history(engine, limit=13, cursor=page.next_cursor)


def test_two_archiving_workers_lose_and_repeat_nothing(engine: sa.Engine, models: Any) -> None:
    queue = Queue(models, [Add], archive_after=timedelta(0))
    events = Events()
    workers = [Worker(queue, engine, concurrency=3, poll_interval=0.2, recover_interval=0.05, on_event=events,
                      worker_id=f"w{i}:1") for i in range(2)]
    ids = enqueue(engine, queue, *(Add(a=i, b=1) for i in range(N)))
    walks = 0
    with running(workers[0]), running(workers[1]):
        events.wait_count("finished", N, timeout=60)
        # Page the history while the archivers move the jobs (they may be done already on a fast
        # machine; the last walk then reads the archive alone): pages never repeat or skip a job.
        while True:
            moved = len(places(engine, models)[1])
            listed = walk(queue, engine)
            assert sorted(listed) == sorted(ids), "a job repeated or went missing from the history"
            walks += 1
            if moved >= N:
                break
        archivers = [w._threads.archiver for w in workers]  # type: ignore[union-attr]
    live, archived, entries = places(engine, models)
    assert live == set() and sorted(archived) == sorted(ids) and entries == {}
    assert sum(a.moved for a in archivers) == N  # type: ignore[union-attr]
    assert walk(queue, engine) == [job_id for job_id in reversed(ids)]
    for i in (0, N // 2, N - 1):
        assert queue.result(engine, ids[i]) == {"sum": i + 1}
        assert [e.outcome for e in queue.journal(engine, ids[i])] == ["completed"]
    assert queue.stats(engine).by_status["completed"] == N
    print(f"METRIC history walks while archiving: {walks}")


def test_a_move_killed_half_way_moves_nothing(engine: sa.Engine, models: Any) -> None:
    """The connection of a move is terminated while the move waits on the day's partition: no job is split."""
    queue = Queue(models, [Add], archive_after=None)
    ids = enqueue(engine, queue, *(Add(a=i, b=0) for i in range(50)))
    Worker(queue, engine, concurrency=4, poll_interval=0.2).run_until_idle()
    with Session(engine) as session, session.begin():
        archive.ensure_partitions(models, session)
        day = models.names.archive_partition(archive.today(session))
    before = places(engine, models)
    pids: list[int] = []
    errors: list[BaseException] = []

    def move() -> None:
        try:
            with Session(engine) as session, session.begin():
                pids.append(session.execute(sa.select(sa.func.pg_backend_pid())).scalar_one())
                archive.move_batch(models, session, archive.MoveParams(after=timedelta(0), batch_size=1000))
        except BaseException as exc:  # noqa: BLE001 - the test checks it
            errors.append(exc)

    with engine.connect() as blocker:
        blocker.execute(sa.text(f"LOCK TABLE {day} IN ACCESS EXCLUSIVE MODE"))
        mover = threading.Thread(target=move)
        mover.start()
        with engine.connect() as watcher:
            def waiting() -> bool:
                return bool(pids) and bool(watcher.execute(sa.text(
                    "SELECT count(*) FROM pg_locks WHERE pid = :pid AND NOT granted"), {"pid": pids[0]}).scalar())
            wait_until(waiting, what="the move to wait on the partition's lock")
            # The move is inside its statement (its first deleted row waits to be routed to the day): kill it.
            assert watcher.execute(sa.select(sa.func.pg_terminate_backend(pids[0]))).scalar_one()
            watcher.commit()
        mover.join(WAIT)
        blocker.rollback()
    assert not mover.is_alive() and errors and isinstance(errors[0], sa.exc.OperationalError)
    assert places(engine, models) == before  # every job whole, still live
    assert queue.archive(engine) == len(ids)
    live, archived, entries = places(engine, models)
    assert live == set() and sorted(archived) == sorted(ids) and entries == {}
    assert all(len(queue.journal(engine, job_id)) == 1 for job_id in ids)


@pytest.mark.parametrize("after", [None, timedelta(hours=1)])
def test_a_worker_without_archiving_or_with_a_long_delay_moves_nothing(
        engine: sa.Engine, models: Any, after: timedelta | None) -> None:
    queue = Queue(models, [Add], archive_after=after)
    events = Events()
    worker = Worker(queue, engine, concurrency=2, poll_interval=0.2, recover_interval=0.05, on_event=events)
    enqueue(engine, queue, Add(a=1, b=1))
    with running(worker):
        events.wait_for("finished")
        if after is not None:
            archiver = worker._threads.archiver  # type: ignore[union-attr]
            archiver.passes.clear()  # type: ignore[union-attr]
            assert archiver.passes.wait(WAIT)  # type: ignore[union-attr]
        else:
            assert worker._threads.archiver is None  # type: ignore[union-attr]
    assert places(engine, models)[1] == []


def test_a_worker_on_an_async_engine_archives_through_its_sync_sibling(
        engine: sa.Engine, models: Any, async_engine: AsyncEngine) -> None:
    queue = Queue(models, [Add], archive_after=timedelta(0))
    events = Events()
    worker = Worker(queue, async_engine, concurrency=2, poll_interval=0.2, recover_interval=0.05, on_event=events)
    ids = enqueue(engine, queue, Add(a=1, b=2), Add(a=3, b=4))
    with running(worker):
        events.wait_count("finished", 2)
        wait_until(lambda: len(places(engine, models)[1]) == 2, what="both jobs archived")
    assert sorted(places(engine, models)[1]) == sorted(ids)
    assert queue.result(engine, ids[1]) == {"sum": 7}
