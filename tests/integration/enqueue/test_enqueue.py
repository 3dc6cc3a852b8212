"""Enqueue joins the caller's transaction: commit publishes, rollback leaves nothing, bad input writes nothing."""

from __future__ import annotations

import math
import select
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

import pytest
import sqlalchemy as sa
from marshmallow import Schema, fields
from sqlalchemy.orm import Session
from support.queues import count
from support.workers import job_row

from venturi_sa import InvalidOption, InvalidPayload, Priority, Queue, Task, UnknownKind, VenturiError


class Mail(Schema):
    to = fields.Email(required=True)
    extra = fields.Raw(load_default=None)


class SendMail(Task):
    KIND = "send_mail"
    Payload = Mail


class Report(Task):
    KIND = "report"


class Unregistered(Task):
    KIND = "unregistered"


@pytest.fixture
def queue(models: Any) -> Queue:
    return Queue(models, [SendMail, Report])


@pytest.fixture
def listener(pg_url: str, engine: sa.Engine, models: Any) -> Iterator[Any]:
    """A raw psycopg2 connection LISTENing on the queue's channel (autocommit)."""
    raw = engine.raw_connection()
    raw.detach()
    conn = raw.dbapi_connection
    conn.autocommit = True
    with conn.cursor() as cur:
        cur.execute(f'LISTEN "{models.names.channel}"')
    yield conn
    conn.close()


def notifications(conn: Any, timeout: float) -> list[str]:
    """Payloads received within ``timeout`` seconds (returns as soon as something arrived)."""
    if select.select([conn], [], [], timeout)[0]:
        conn.poll()
    got = [n.payload for n in conn.notifies]
    conn.notifies.clear()
    return got


def test_commit_publishes_the_job_and_notifies(engine: sa.Engine, models: Any, queue: Queue, listener: Any) -> None:
    with Session(engine) as session:
        job = queue.enqueue(session, SendMail(to="a@example.com"))
        job_id = job.id
        assert count(engine, models.jobs_table) == 0  # enqueue never commits
        assert notifications(listener, 0.2) == []  # NOTIFY rides the open transaction
        session.commit()
    row = job_row(engine, models, job_id)
    assert (row.kind, row.payload, row.status, row.priority) == (
        "send_mail", {"to": "a@example.com", "extra": None}, "pending", 1)
    assert row.visible_at == row.created_at and row.run_count == 0 and row.carry is None
    assert notifications(listener, 5) == ["send_mail"]


def test_rollback_leaves_no_row_and_no_notification(engine: sa.Engine, models: Any, queue: Queue,
                                                    listener: Any) -> None:
    with Session(engine) as session:
        queue.enqueue(session, SendMail(to="a@example.com"))
        queue.enqueue_many(session, [SendMail(to="b@example.com"), SendMail(to="c@example.com")])
        session.rollback()
    with Session(engine) as session, session.begin():  # a marker sent after the rollback
        queue.enqueue(session, Report())
    assert notifications(listener, 5) == ["report"]  # notifications arrive in commit order
    assert count(engine, models.jobs_table, "WHERE kind = 'send_mail'") == 0
    assert count(engine, models.journal_table) == 0


def test_enqueue_joins_the_callers_transaction_with_its_own_writes(engine: sa.Engine, models: Any,
                                                                   queue: Queue, prefix: str) -> None:
    with engine.begin() as conn:
        conn.execute(sa.text(f"CREATE TABLE {prefix}_orders (id int PRIMARY KEY)"))
    for commit in (False, True):
        with Session(engine) as session:
            session.execute(sa.text(f"INSERT INTO {prefix}_orders VALUES (7)"))
            queue.enqueue(session, SendMail(to="shop@example.com"))
            session.commit() if commit else session.rollback()
        assert count(engine, f"{prefix}_orders") == count(engine, models.jobs_table) == int(commit)


def test_enqueue_many_bulk_inserts_in_a_few_statements(engine: sa.Engine, models: Any, queue: Queue) -> None:
    inserts: list[str] = []

    def record(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if statement.lstrip().upper().startswith("INSERT"):
            inserts.append(statement)

    tasks = [SendMail(to=f"user{n}@example.com") for n in range(2000)]
    sa.event.listen(engine, "before_cursor_execute", record)
    try:
        with Session(engine) as session, session.begin():
            jobs = queue.enqueue_many(session, tasks, priority=Priority.LOW)
            ids = [job.id for job in jobs]
    finally:
        sa.event.remove(engine, "before_cursor_execute", record)
    assert len(set(ids)) == 2000 and all(len(i) == 26 for i in ids)
    assert count(engine, models.jobs_table, "WHERE priority = 2 AND status = 'pending'") == 2000
    assert 1 <= len(inserts) <= 10  # batched, not one round trip per job


def test_delay_and_run_at_set_visible_at_on_the_db_clock(engine: sa.Engine, models: Any, queue: Queue) -> None:
    at = datetime(2099, 5, 6, 7, 8, 9, tzinfo=timezone(timedelta(hours=2)))
    with Session(engine) as session, session.begin():
        delayed = queue.enqueue(session, Report(), delay=timedelta(minutes=5)).id
        scheduled = queue.enqueue(session, Report(), run_at=at).id
    row = job_row(engine, models, delayed)
    assert row.visible_at - row.created_at == timedelta(minutes=5)
    assert job_row(engine, models, scheduled).visible_at == at


BAD_ENQUEUES: list[tuple[str, Any, dict[str, Any], type[VenturiError], str]] = [
    ("unknown kind", lambda: Unregistered(), {}, UnknownKind, "unregistered"),
    ("Decimal", lambda: SendMail(to="a@example.com", extra={"amount": Decimal("1.5")}), {},
     InvalidPayload, "extra.amount"),
    ("datetime", lambda: SendMail(to="a@example.com", extra=[datetime.now(timezone.utc)]), {},
     InvalidPayload, "extra[0]"),
    ("NaN", lambda: SendMail(to="a@example.com", extra={"x": math.nan}), {}, InvalidPayload, "extra.x"),
    ("set", lambda: SendMail(to="a@example.com", extra={"tags": {"a"}}), {}, InvalidPayload, "extra.tags"),
    ("priority out of range", lambda: Report(), {"priority": 5}, InvalidOption, "priority"),
    ("priority bool", lambda: Report(), {"priority": True}, InvalidOption, "priority"),
    ("priority str", lambda: Report(), {"priority": "high"}, InvalidOption, "priority"),
    ("naive run_at", lambda: Report(), {"run_at": datetime(2030, 1, 1)}, InvalidOption, "timezone-aware"),
    ("both delay and run_at", lambda: Report(),
     {"delay": timedelta(1), "run_at": datetime.now(timezone.utc)}, InvalidOption, "not both"),
    ("negative delay", lambda: Report(), {"delay": timedelta(seconds=-1)}, InvalidOption, "delay"),
    ("not a task", lambda: {"kind": "report"}, {}, InvalidOption, "Task"),
]


@pytest.mark.parametrize(("case", "make", "options", "error", "needle"), BAD_ENQUEUES,
                         ids=[c[0] for c in BAD_ENQUEUES])
def test_bad_input_is_refused_and_nothing_is_flushed(engine: sa.Engine, models: Any, queue: Queue, case: str,
                                                     make: Any, options: dict[str, Any],
                                                     error: type[VenturiError], needle: str) -> None:
    with Session(engine) as session:
        good = SendMail(to="first@example.com")
        with pytest.raises(error) as info:
            queue.enqueue_many(session, [good, make()], **options)  # a bad task after a good one
        assert needle in str(info.value)
        assert not session.new and not session.dirty
        # this query autoflushes: anything left pending in the session would show up here
        assert session.execute(sa.select(sa.func.count()).select_from(models.Job)).scalar_one() == 0
        session.commit()
    assert count(engine, models.jobs_table) == 0


def test_payload_failing_its_schema_names_the_field_at_construction() -> None:
    with pytest.raises(InvalidPayload) as info:
        SendMail(to="not an address")
    assert "to" in info.value.fields and "to" in str(info.value)
    with pytest.raises(InvalidPayload) as info:
        SendMail(to="a@example.com", surprise=1)
    assert "surprise" in str(info.value)
    with pytest.raises(InvalidPayload) as info:
        SendMail()
    assert "to" in info.value.fields


def test_enqueued_job_reads_back_inside_the_transaction(engine: sa.Engine, queue: Queue) -> None:
    with Session(engine) as session, session.begin():
        job = queue.enqueue(session, SendMail(to="a@example.com"), priority=Priority.HIGH)
        assert (job.kind, job.priority, job.status, job.payload["to"]) == ("send_mail", 0, "pending", "a@example.com")
        assert job in session
