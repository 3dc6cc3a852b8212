"""Dedup needs READ COMMITTED; plain enqueue works under any isolation (defect #7, dedup part).

Under REPEATABLE READ or SERIALIZABLE the caller's snapshot predates the dedup
lock, so the lookup misses a sibling another enqueuer just committed and a
duplicate gets through.  Enqueue refuses that with ``UnsupportedIsolation``
(an ``InvalidOption``) before it adds anything or takes any lock.
"""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa
from marshmallow import Schema, fields
from sqlalchemy.orm import Session
from support.queues import count
from support.workers import enqueue

from venturi_sa import InvalidOption, JobContext, Queue, Task, errors

STRICT = ["REPEATABLE READ", "SERIALIZABLE"]
ADVISORY_LOCKS_HELD = sa.text("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()")


class Refresh(Task):
    """Deduplicated by account, unless ``account`` is 0."""

    KIND = "refresh"

    class Payload(Schema):
        account = fields.Integer(required=True)

    def dedup_key(self) -> str | None:
        return f"account:{self.payload['account']}" if self.payload["account"] else None

    def run(self, ctx: JobContext) -> None:
        pass


class Plain(Task):
    KIND = "plain"

    def run(self, ctx: JobContext) -> None:
        pass


@pytest.fixture
def queue(models: Any) -> Queue:
    return Queue(models, [Refresh, Plain])


def pending_refreshes(engine: sa.Engine, models: Any) -> int:
    return count(engine, models.jobs_table, "WHERE kind = 'refresh' AND status = 'pending'")


@pytest.mark.parametrize("isolation", STRICT)
def test_dedup_enqueue_refuses_a_stricter_isolation(engine: sa.Engine, models: Any, queue: Queue,
                                                    isolation: str) -> None:
    with Session(engine.execution_options(isolation_level=isolation)) as session:
        with pytest.raises(InvalidOption) as info:
            queue.enqueue_many(session, [Plain(), Refresh(account=1)])
        assert isinstance(info.value, errors.UnsupportedIsolation)
        assert isolation in str(info.value) and "READ COMMITTED" in str(info.value)
        assert not session.new and not session.dirty
        assert session.execute(ADVISORY_LOCKS_HELD).scalar_one() == 0  # no lock taken either
        session.commit()
    assert count(engine, models.jobs_table) == 0


@pytest.mark.parametrize("isolation", STRICT)
def test_a_snapshot_older_than_a_committed_sibling_cannot_add_a_duplicate(engine: sa.Engine, models: Any,
                                                                         queue: Queue, isolation: str) -> None:
    with Session(engine.execution_options(isolation_level=isolation)) as late:
        late.execute(sa.select(1))  # the snapshot is taken here
        enqueue(engine, queue, Refresh(account=1))  # another session commits the first job of the key
        with pytest.raises(InvalidOption):
            queue.enqueue(late, Refresh(account=1))
        late.commit()
    assert pending_refreshes(engine, models) == 1


@pytest.mark.parametrize("isolation", ["READ COMMITTED", *STRICT])
def test_plain_enqueue_works_under_any_isolation_in_concurrent_transactions(engine: sa.Engine, models: Any,
                                                                            queue: Queue, isolation: str) -> None:
    strict = engine.execution_options(isolation_level=isolation)
    with Session(strict) as first, Session(strict) as second:
        first.execute(sa.select(1))
        second.execute(sa.select(1))  # both snapshots are open before either enqueues
        for session in (first, second):
            queue.enqueue(session, Plain())
            queue.enqueue_many(session, [Plain(), Plain(), Refresh(account=0)])  # a dedup_key() of None
        first.commit()
        second.commit()
    assert count(engine, models.jobs_table) == 8


def test_read_committed_dedup_sees_a_sibling_committed_after_its_transaction_began(
        engine: sa.Engine, models: Any, queue: Queue) -> None:
    with Session(engine) as late:
        late.execute(sa.select(1))
        enqueue(engine, queue, Refresh(account=1))
        queue.enqueue(late, Refresh(account=1))
        late.commit()
    assert pending_refreshes(engine, models) == 1
    assert count(engine, models.journal_table, "WHERE outcome = 'merged'") == 1
