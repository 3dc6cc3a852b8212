"""The bulk enqueue path: one INSERT ... SELECT FROM unnest(...) returning session objects."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import sqlalchemy as sa
from marshmallow import Schema, fields
from sqlalchemy.orm import Session

import venturi_sa as v


class Item(v.Task):
    KIND = "bulk_item"

    class Payload(Schema):
        n = fields.Integer(required=True)
        tags = fields.List(fields.String(), load_default=list)

    def run(self, ctx: v.JobContext) -> None:
        return None


def test_bulk_rows_match_single_rows_and_belong_to_the_session(engine, models) -> None:  # type: ignore[no-untyped-def]
    queue = v.Queue(models, [Item])
    with Session(engine) as session:
        jobs = queue.enqueue_many(session, [Item(n=i, tags=["a", "é"]) for i in range(500)],
                                  priority=v.Priority.LOW)
        assert [job in session for job in jobs] == [True] * 500
        assert [job.payload["n"] for job in jobs] == list(range(500))
        ids = [job.id for job in jobs]
        single_id = queue.enqueue(session, Item(n=999)).id
        session.commit()
    jobs_table = models.jobs_table
    with engine.connect() as conn:
        rows = conn.execute(sa.select(jobs_table).where(jobs_table.c.id.in_(ids))).mappings().all()
        one = conn.execute(sa.select(jobs_table).where(jobs_table.c.id == single_id)).mappings().one()
    assert len(rows) == 500
    for row in rows:
        assert row["status"] == "pending" and row["priority"] == 2 and row["carry"] is None
        assert row["created_at"] == row["visible_at"] and row["run_count"] == 0 and row["dedup_key"] is None
        assert row["payload"]["tags"] == ["a", "é"]
    assert set(one.keys()) == set(rows[0].keys())


def test_bulk_run_at_is_kept_exactly(engine, models) -> None:  # type: ignore[no-untyped-def]
    queue = v.Queue(models, [Item])
    when = datetime(2031, 1, 2, 3, 4, 5, 678901, tzinfo=timezone(timedelta(hours=5)))
    with Session(engine) as session:
        jobs = queue.enqueue_many(session, [Item(n=1), Item(n=2)], run_at=when)
        session.commit()
        assert [job.visible_at for job in jobs] == [when, when]


def test_bulk_rollback_leaves_nothing(engine, models) -> None:  # type: ignore[no-untyped-def]
    queue = v.Queue(models, [Item])
    with Session(engine) as session:
        queue.enqueue_many(session, [Item(n=i) for i in range(10)])
        session.rollback()
    with engine.connect() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(models.jobs_table)).scalar() == 0


def test_notify_false_sends_no_notification(engine, models, pg_url: str) -> None:  # type: ignore[no-untyped-def]
    import select

    raw = engine.raw_connection()
    raw.detach()
    listener = raw.dbapi_connection
    listener.autocommit = True
    listener.cursor().execute(f'LISTEN "{models.names.channel}"')
    try:
        for notify, expected in ((False, 0), (True, 1)):
            queue = v.Queue(models, [Item], notify=notify)
            with Session(engine) as session:
                queue.enqueue(session, Item(n=1))
                queue.enqueue_many(session, [Item(n=2), Item(n=3)])
                session.commit()
            select.select([listener], [], [], 1.0 if expected else 0.3)
            listener.poll()
            kinds = {n.payload for n in listener.notifies}
            listener.notifies.clear()
            assert len(kinds) == expected, (notify, kinds)
    finally:
        listener.close()
