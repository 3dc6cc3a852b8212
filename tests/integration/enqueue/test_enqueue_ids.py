"""``enqueue_many(..., ids_only=True)``: the bulk path that returns ids and builds no ``Job`` objects.

Same semantics as ``enqueue_many``: the rows join the caller's transaction
(commit publishes them, rollback leaves nothing), the queue's ``NOTIFY`` is
delivered once per kind at commit, dedup tasks take the ordinary path (its
locks and merges), and bad input raises with nothing written.  The async
twin is in ``tests/integration/conformance/test_enqueue_per_stack.py`` (every stack).
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

import pytest
import sqlalchemy as sa
from marshmallow import Schema, fields
from sqlalchemy.orm import Session
from support.queues import count, outcomes

import venturi_sa as v
from venturi_sa import InvalidOption, InvalidPayload, UnknownKind
from venturi_sa.testing import inline


class Item(v.Task):
    KIND = "ids_item"

    class Payload(Schema):
        n = fields.Integer(required=True)
        tags = fields.List(fields.String(), load_default=list)

    def run(self, ctx: v.JobContext) -> None:
        return None


class Plain(v.Task):
    KIND = "ids_plain"

    class Payload(Schema):
        n = fields.Integer(required=True)

    def run(self, ctx: v.JobContext) -> None:
        return None


class Loose(v.Task):
    KIND = "ids_loose"

    class Payload(Schema):
        value = fields.Raw(required=True)

    def run(self, ctx: v.JobContext) -> None:
        return None


class Keyed(v.Task):
    KIND = "ids_keyed"

    class Payload(Schema):
        n = fields.Integer(required=True)

    def dedup_key(self) -> str:
        return "one"

    def run(self, ctx: v.JobContext) -> None:
        return None


class Unregistered(v.Task):
    KIND = "ids_unregistered"


@pytest.fixture
def queue(models: Any) -> v.Queue:
    return v.Queue(models, [Item, Plain, Loose, Keyed])


def rows(engine: sa.Engine, models: Any, ids: list[str]) -> list[dict[str, Any]]:
    table = models.jobs_table
    with engine.connect() as conn:
        found = conn.execute(sa.select(table).where(table.c.id.in_(ids))).mappings().all()
    by_id = {row["id"]: dict(row) for row in found}
    return [by_id[i] for i in ids]


def test_rows_match_the_ordinary_path_and_nothing_enters_the_session(engine: sa.Engine, models: Any,
                                                                      queue: v.Queue) -> None:
    tasks = [Item(n=i, tags=["a", "é"]) if i % 2 else Plain(n=i) for i in range(300)]
    with Session(engine) as session:
        pending = models.Job(kind="ids_plain", payload={"n": -1})
        session.add(pending)  # the caller's own unflushed object stays unflushed
        ids = queue.enqueue_many(session, tasks, priority=v.Priority.LOW, ids_only=True)
        assert list(session.identity_map.values()) == [] and list(session.new) == [pending]
        seen = session.connection().execute(sa.text(f"SELECT count(*) FROM {models.jobs_table.name}")).scalar_one()
        assert seen == 300  # in the caller's transaction already (read without autoflushing ``pending``)
        assert count(engine, models.jobs_table) == 0  # not before the commit
        [reference] = queue.enqueue_many(session, [Item(n=1, tags=["a", "é"])], priority=v.Priority.LOW)
        reference_id = reference.id
        session.commit()
    assert len(set(ids)) == 300 and all(isinstance(i, str) and len(i) == 26 for i in ids)
    assert ids == sorted(ids)  # one call's ids increase in the order given
    got = rows(engine, models, ids)
    assert [r["kind"] for r in got] == ["ids_item" if i % 2 else "ids_plain" for i in range(300)]
    assert [r["payload"] for r in got] == [{"n": i, "tags": ["a", "é"]} if i % 2 else {"n": i}
                                           for i in range(300)]
    [ref] = rows(engine, models, [reference_id])
    same = {k: ref[k] for k in ref if k not in ("id", "payload", "kind", "created_at", "visible_at")}
    for row in got:
        assert {k: row[k] for k in same} == same  # status, priority, counters, carry... as the ORM path
        assert row["created_at"] == row["visible_at"]


def test_delay_and_run_at(engine: sa.Engine, models: Any, queue: v.Queue) -> None:
    when = datetime(2031, 1, 2, 3, 4, 5, 678901, tzinfo=timezone(timedelta(hours=5)))
    with Session(engine) as session:
        later = queue.enqueue_many(session, [Plain(n=1)], delay=timedelta(minutes=3), ids_only=True)
        fixed = queue.enqueue_many(session, [Plain(n=2)], run_at=when, ids_only=True)
        session.commit()
    [delayed] = rows(engine, models, later)
    [scheduled] = rows(engine, models, fixed)
    assert delayed["visible_at"] - delayed["created_at"] == timedelta(minutes=3)
    assert scheduled["visible_at"] == when


def test_rollback_leaves_nothing_and_commit_notifies_once_per_kind(engine: sa.Engine, models: Any,
                                                                   queue: v.Queue) -> None:
    from venturi_sa.storage import drivers

    listener = drivers.listen(engine, [models.names.channel])
    try:
        with Session(engine) as session:
            queue.enqueue_many(session, [Plain(n=i) for i in range(5)], ids_only=True)
            session.rollback()
        assert count(engine, models.jobs_table) == 0
        assert listener.wait(0.2) == []  # the rollback's NOTIFY was dropped
        with Session(engine) as session:
            queue.enqueue_many(session, [Plain(n=i) for i in range(5)] + [Item(n=9)], ids_only=True)
            queue.enqueue_many(session, [Plain(n=7)], ids_only=True)
            assert listener.wait(0.2) == []  # nothing before the commit
            session.commit()
        heard: list[str] = []
        while len(heard) < 2:
            got = listener.wait(20.0)
            assert got, f"no NOTIFY after the commit (heard {heard})"
            heard += [n.payload for n in got]
        assert sorted(heard) == ["ids_item", "ids_plain"]  # one per kind for the whole transaction
        assert listener.wait(0.2) == []
    finally:
        listener.close()
    assert count(engine, models.jobs_table) == 7


def test_dedup_tasks_take_the_ordinary_path(engine: sa.Engine, models: Any, queue: v.Queue) -> None:
    with Session(engine) as session:
        [target] = queue.enqueue_many(session, [Keyed(n=1)], ids_only=True)
        session.commit()
    with Session(engine) as session:
        ids = queue.enqueue_many(session, [Plain(n=5), Keyed(n=2), Keyed(n=3)], ids_only=True)
        session.commit()
    assert ids[1:] == [target, target]  # absorbed by the pending sibling: its id
    assert count(engine, models.jobs_table) == 2
    assert outcomes(engine, models, target) == ["merged", "merged"]


@pytest.mark.parametrize(("tasks", "options", "error", "match"), [
    (lambda: [Plain(n=1), Unregistered()], {}, UnknownKind, "ids_unregistered"),
    (lambda: [Plain(n=1), "not a task"], {}, InvalidOption, "Task instances"),
    (lambda: [Plain(n=1)], {"priority": 7}, InvalidOption, "priority"),
    (lambda: [Plain(n=1)], {"delay": timedelta(1), "run_at": datetime.now(timezone.utc)}, InvalidOption,
     "either delay or run_at"),
    (lambda: [Loose(value=1), Loose(value=Decimal("1.5")), Loose(value="x")], {}, InvalidPayload,
     "value"),
], ids=["unregistered", "not-a-task", "priority", "delay-and-run_at", "payload-not-json"])
def test_bad_input_writes_nothing(engine: sa.Engine, models: Any, queue: v.Queue, tasks: Any,
                                  options: dict[str, Any], error: type[Exception], match: str) -> None:
    with Session(engine) as session:
        with pytest.raises(error, match=match):
            queue.enqueue_many(session, tasks(), ids_only=True, **options)
        assert not session.in_transaction() or session.execute(
            sa.text(f"SELECT count(*) FROM {models.jobs_table.name}")).scalar_one() == 0
        queue.enqueue_many(session, [Plain(n=2)], ids_only=True)  # the transaction carries on
        session.commit()
    assert count(engine, models.jobs_table) == 1


def test_inline_mode_runs_the_jobs_and_returns_their_ids(session: Session, models: Any, queue: v.Queue) -> None:
    with inline(queue) as runner:
        ids = queue.enqueue_many(session, [Plain(n=1), Plain(n=2)], ids_only=True)
    assert [run.job_id for run in runner.runs] == ids
    statuses = session.execute(sa.select(models.Job.status).where(models.Job.id.in_(ids))).scalars().all()
    assert statuses == ["completed", "completed"]
