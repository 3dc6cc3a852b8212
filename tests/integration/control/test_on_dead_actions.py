"""``on_dead`` for operator actions: made in the action's transaction (rolled back with it), and a hook that
raises there leaves the call owed, with its attempt counted, for a worker of the kind to make."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column, sessionmaker
from support.workers import enqueue

from venturi_sa import JobContext, Queue, Task
from venturi_sa.owed_calls import MAX_RETRY_WAIT, retry_wait
from venturi_sa.worker.outcome_hooks import OutcomeContext
from venturi_sa.worker.owed_calls import OwedCaller

ATTEMPTS_BEFORE_IT_WORKS = 1


def exports(engine: sa.Engine, prefix: str) -> str:
    table = f"{prefix}_exports"
    with engine.begin() as conn:
        conn.execute(sa.text(f"CREATE TABLE {table} (job_id text NOT NULL)"))
    return table


def export_task(table: str, failures: list[int], error: type[BaseException] = RuntimeError) -> type[Task]:
    class Export(Task):
        KIND = "export"

        def run(self, ctx: JobContext) -> None:
            pass

        def on_dead(self, ctx: OutcomeContext, note: str | None) -> None:
            ctx.session.execute(sa.text(f"INSERT INTO {table} (job_id) VALUES (:j)"), {"j": ctx.job_id})
            if failures:
                failures.pop()
                raise error("the export service is down")

    return Export


def owed(engine: sa.Engine, models: Any, job_id: str) -> list[sa.Row[Any]]:
    t = models.on_dead_table
    with engine.connect() as conn:
        return list(conn.execute(sa.select(t.c.attempts, t.c.last_error).where(t.c.job_id == job_id)))


def calls(engine: sa.Engine, table: str, job_id: str) -> int:
    with engine.connect() as conn:
        return int(conn.execute(sa.text(f"SELECT count(*) FROM {table} WHERE job_id = :j"), {"j": job_id})
                   .scalar_one())


def test_a_cancel_rolled_back_with_its_session_makes_no_call_and_owes_none(engine: sa.Engine, models: Any) -> None:
    table = exports(engine, models.prefix)
    queue = Queue(models, [export_task(table, [])])
    job_id, = enqueue(engine, queue, queue.registry.get("export")())
    with Session(engine) as session:
        queue.cancel(session, job_id, "changed my mind")
        session.rollback()
    assert queue.get_job(engine, job_id).status == "pending"
    assert calls(engine, table, job_id) == 0 and owed(engine, models, job_id) == []


@pytest.mark.parametrize("error", [RuntimeError, SystemExit, GeneratorExit])
def test_an_on_dead_that_raises_in_a_kill_stays_owed_and_a_worker_makes_it(engine: sa.Engine, models: Any,
                                                                          error: type[BaseException]) -> None:
    """``SystemExit`` too: the action still commits, the call stays owed with its attempt counted."""
    table = exports(engine, models.prefix)
    failures = [1] * ATTEMPTS_BEFORE_IT_WORKS
    queue = Queue(models, [export_task(table, failures, error)])
    job_id, = enqueue(engine, queue, queue.registry.get("export")())
    queue.kill(engine, job_id, "by hand")  # the action commits; its hook's savepoint rolled back
    assert queue.get_job(engine, job_id).status == "dead"
    assert calls(engine, table, job_id) == 0
    [(attempts, error)] = owed(engine, models, job_id)
    assert attempts == 1 and "the export service is down" in error
    with engine.begin() as conn:  # due now rather than after its backoff
        conn.execute(sa.update(models.on_dead_table).values(not_before=sa.func.now()))
    caller = OwedCaller(models, queue.registry, ["export"], sessionmaker(engine), every=1.0,
                        stopping=threading.Event())  # a worker's pass over the calls its kinds owe
    assert caller.make_due() == 1
    assert calls(engine, table, job_id) == 1 and owed(engine, models, job_id) == []


def test_retry_wait_doubles_from_a_second_to_an_hour() -> None:
    assert [retry_wait(n) for n in range(4)] == [timedelta(seconds=s) for s in (1, 2, 4, 8)]
    assert retry_wait(12) == MAX_RETRY_WAIT == retry_wait(10_000)


def test_what_a_failing_on_dead_added_to_the_session_is_not_committed_with_the_action(
        engine: sa.Engine, models: Any) -> None:
    class Base(DeclarativeBase):
        pass

    class ExportRow(Base):
        __tablename__ = f"{models.prefix}_export_rows"
        job_id: Mapped[str] = mapped_column(primary_key=True)

    Base.metadata.create_all(engine)

    class Export(Task):
        KIND = "export"

        def run(self, ctx: JobContext) -> None:
            pass

        def on_dead(self, ctx: OutcomeContext, note: str | None) -> None:
            ctx.session.add(ExportRow(job_id=ctx.job_id))  # pending in the session, not flushed
            raise RuntimeError("the export service is down")

    queue = Queue(models, [Export])
    job_id, = enqueue(engine, queue, Export())
    queue.kill(engine, job_id, "by hand")
    with Session(engine) as session:
        assert session.scalars(sa.select(ExportRow)).all() == []
    assert queue.get_job(engine, job_id).status == "dead" and len(owed(engine, models, job_id)) == 1


def test_a_workers_owed_call_raising_system_exit_is_deferred_and_the_caller_goes_on(engine: sa.Engine,
                                                                                     models: Any) -> None:
    """The owed-call thread survives a hook's ``SystemExit``: the call is deferred, counted, and made later."""
    table = exports(engine, models.prefix)
    queue = Queue(models, [export_task(table, [1], SystemExit)])
    job_id, = enqueue(engine, queue, queue.registry.get("export")())
    Queue(models, []).kill(engine, job_id, "by hand")  # an operator without the task's code: the call is owed
    assert owed(engine, models, job_id) == [(0, None)]
    caller = OwedCaller(models, queue.registry, ["export"], sessionmaker(engine), every=1.0,
                        stopping=threading.Event())
    assert caller.make_due() == 1  # made (and deferred): no SystemExit out of the thread's pass
    [(attempts, error)] = owed(engine, models, job_id)
    assert attempts == 1 and error.startswith("SystemExit")
    with engine.begin() as conn:
        conn.execute(sa.update(models.on_dead_table).values(not_before=sa.func.now()))
    assert caller.make_due() == 1
    assert calls(engine, table, job_id) == 1 and owed(engine, models, job_id) == []
