"""purge: a committing suite removes a queue's jobs and journal."""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.orm import Session

from venturi_sa import Models, Queue
from venturi_sa.testing import drain, purge


def _count(engine: sa.Engine, table: sa.Table) -> int:
    with engine.connect() as conn:
        return int(conn.execute(sa.select(sa.func.count()).select_from(table)).scalar_one())


def test_purge_with_an_engine_commits(engine: sa.Engine, models: Models, venturi_queue: Queue) -> None:
    q = venturi_queue
    with Session(engine) as s, s.begin():
        q.enqueue_many(s, [q.registry.get("spawn")(n=1), q.registry.get("nap")()])
        drain(s, q, kinds=["nap"])
    assert (_count(engine, models.jobs_table), _count(engine, models.journal_table)) == (2, 1)
    assert purge(engine, q) == 2
    assert (_count(engine, models.jobs_table), _count(engine, models.journal_table)) == (0, 0)


def test_purge_in_a_session_is_the_callers_to_commit(engine: sa.Engine, models: Models, venturi_queue: Queue) -> None:
    with Session(engine) as s, s.begin():
        venturi_queue.enqueue(s, venturi_queue.registry.get("note")(body="x"))
    with Session(engine) as s:
        assert purge(s, models) == 1
        s.rollback()
    assert _count(engine, models.jobs_table) == 1
    with engine.connect() as conn:
        purge(conn, models)
        conn.commit()
    assert _count(engine, models.jobs_table) == 0
