"""Enqueue refuses hostile input with venturi's own errors, naming the field and writing nothing (issue 24 item 7).

Every case runs through ``enqueue``, ``enqueue_many`` (both paths) and the
async twins against the real database, then checks that the jobs and
timeouts tables are empty after the session commits.  The bounds are in
docs/tasks.md ("Bounds on what enqueue accepts").
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
import sqlalchemy as sa
from marshmallow import Schema, fields
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession
from sqlalchemy.orm import Session
from support.async_engines import async_engine_fixture  # noqa: F401 - the async_engine fixture
from support.queues import count

from venturi_sa import InvalidOption, InvalidPayload, JobContext, Queue, Task
from venturi_sa.errors import VenturiError
from venturi_sa.payloads import MAX_DEPTH, MAX_INT, MIN_INT
from venturi_sa.storage.enqueue import InsertParams, NewJob, NewJobColumns, insert_jobs, insert_rows

UTC = timezone.utc


class Blob(Schema):
    data = fields.Raw(required=True)


class Store(Task):
    KIND = "store"
    Payload = Blob

    def run(self, ctx: JobContext) -> None:
        pass


class Keyed(Task):
    KIND = "keyed"
    Payload = Blob

    def dedup_key(self) -> str:
        data = self.payload["data"]  # an int n: a key of n bytes; a name: a bad key
        return "k" * data if isinstance(data, int) else {"surrogate": "k\ud800", "nul": "k\x00"}.get(data, data)

    def run(self, ctx: JobContext) -> None:
        pass


def nested(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = [value]
    return value


SMALL = 4096  # the queue's max_payload_bytes in these tests


# name -> (task factory, enqueue options, error type, text the message must contain)
CASES: dict[str, tuple[Callable[[], Task], dict[str, Any], type[VenturiError], str]] = {
    "nesting 5000 deep": (lambda: Store(data=nested(5000)), {}, InvalidPayload, f"more than {MAX_DEPTH} levels"),
    "a 5000-digit integer": (lambda: Store(data={"n": 10**4999}), {}, InvalidPayload, "data.n"),
    "an integer past 64 bits": (lambda: Store(data=[1, MAX_INT + 1]), {}, InvalidPayload, "data[1]"),
    "a lone surrogate": (lambda: Store(data={"s": "ok\ud800"}), {}, InvalidPayload, "lone surrogate"),
    "a lone surrogate in a key": (lambda: Store(data={"\udfff": 1}), {}, InvalidPayload, "lone surrogate"),
    "a payload over max_payload_bytes": (lambda: Store(data="x" * SMALL), {}, InvalidPayload, "bytes as JSON"),
    "a 1 MB dedup key": (lambda: Keyed(data=1_000_000), {}, InvalidOption, "Keyed.dedup_key()"),
    "a dedup key of 513 bytes": (lambda: Keyed(data=513), {}, InvalidOption, "over the 512-byte bound"),
    "a dedup key with a lone surrogate": (lambda: Keyed(data="surrogate"), {}, InvalidOption, "surrogate"),
    "a dedup key with a NUL": (lambda: Keyed(data="nul"), {}, InvalidOption, "NUL"),
    "delay=timedelta.max": (lambda: Store(data=1), {"delay": timedelta.max}, InvalidOption, "delay"),
    "run_at in year 1": (lambda: Store(data=1), {"run_at": datetime(1, 1, 1, tzinfo=UTC)}, InvalidOption, "run_at"),
    "run_at in year 9999": (lambda: Store(data=1), {"run_at": datetime(9999, 1, 1, tzinfo=UTC)}, InvalidOption,
                            "run_at"),
    "timeout=timedelta.max": (lambda: Store(data=1), {"timeout": timedelta.max}, InvalidOption, "timeout"),
}


@pytest.fixture
def queue(models: Any) -> Queue:
    return Queue(models, [Store, Keyed], max_payload_bytes=SMALL)


def only_kept(engine: sa.Engine, models: Any) -> None:
    """The refused call wrote nothing: the session's own enqueue before it is the only row, once committed."""
    with engine.connect() as conn:
        assert conn.execute(sa.select(models.jobs_table.c.payload)).scalars().all() == [{"data": "kept"}]
    assert count(engine, f"{models.prefix}_journal") == 0
    assert count(engine, f"{models.prefix}_timeouts") == 0


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("call", ["enqueue", "enqueue_many", "ids_only", "job"])
def test_hostile_input_is_refused_naming_the_field_and_nothing_is_written(
        engine: sa.Engine, models: Any, queue: Queue, case: str, call: str) -> None:
    make, options, error, text = CASES[case]
    task = make()
    with Session(engine) as session:
        queue.enqueue(session, Store(data="kept"))  # the session's own work survives the refusal
        with pytest.raises(error) as raised:
            if call == "enqueue":
                queue.enqueue(session, task, **options)
            elif call == "enqueue_many":
                queue.enqueue_many(session, [Store(data="fine"), task], **options)
            elif call == "ids_only":
                queue.enqueue_many(session, [Store(data="fine"), task], ids_only=True, **options)
            else:
                session.add(queue.job(task, **options))
        assert text in str(raised.value)
        assert len(str(raised.value)) < 1000  # never the payload itself
        assert not session.new
        session.commit()  # the transaction is intact: the refusal changed nothing in it
    only_kept(engine, models)


@pytest.mark.parametrize("case", ["nesting 5000 deep", "a 5000-digit integer", "a lone surrogate",
                                  "a payload over max_payload_bytes", "a 1 MB dedup key", "delay=timedelta.max",
                                  "run_at in year 1", "timeout=timedelta.max"])
def test_the_async_twins_refuse_the_same(engine: sa.Engine, models: Any, queue: Queue, async_engine: AsyncEngine,
                                         case: str) -> None:
    make, options, error, text = CASES[case]

    async def main() -> None:
        async with AsyncSession(async_engine) as session:
            await queue.enqueue_async(session, Store(data="kept"))
            with pytest.raises(error, match=re.escape(text)):
                await queue.enqueue_async(session, make(), **options)
            with pytest.raises(error):
                await queue.enqueue_many_async(session, [Store(data="fine"), make()], ids_only=True, **options)
            assert not session.new
            await session.commit()

    asyncio.run(main())
    only_kept(engine, models)


def test_a_merged_payload_over_the_bound_is_refused_and_the_target_kept(engine: sa.Engine, models: Any) -> None:
    class Grow(Task):
        KIND = "grow"
        Payload = Blob

        def dedup_key(self) -> str:
            return "one"

        def merge(self, existing: Any) -> Any:
            from venturi_sa import Coalesce

            return Coalesce({"data": existing.payload["data"] + self.payload["data"]})

    queue = Queue(models, [Grow], max_payload_bytes=SMALL)
    with Session(engine) as session, session.begin():
        target = queue.enqueue(session, Grow(data="a" * 3000)).id
    with Session(engine) as session:
        with pytest.raises(InvalidPayload, match="merged payload of 'grow'"):
            queue.enqueue(session, Grow(data="b" * 3000))
        session.commit()
    with engine.connect() as conn:
        payload = conn.execute(sa.select(models.jobs_table.c.payload)).scalar_one()
    assert payload == {"data": "a" * 3000} and count(engine, models.jobs_table) == 1
    assert count(engine, f"{models.prefix}_journal", f"WHERE job_id = '{target}'") == 0


def test_values_at_the_bounds_round_trip_through_jsonb_exactly(engine: sa.Engine, models: Any) -> None:
    queue = Queue(models, [Store])  # the default bound, 1 MiB
    data = {"ints": [MIN_INT, MAX_INT, 2**53 + 1, -(2**53) - 1], "deep": nested(MAX_DEPTH - 2),
            "text": "é€😀 \"quoted\" \\ \n", "float": 0.1, "big": "x" * (1024 * 1024 - 1000)}
    with Session(engine) as session, session.begin():
        job_id = queue.enqueue(session, Store(data=data)).id
    assert queue.get_job(engine, job_id).payload == {"data": data}
    too_big = {**data, "big": "x" * (1024 * 1024)}
    with Session(engine) as session, pytest.raises(InvalidPayload, match="1,048,576-byte bound"):
        queue.enqueue(session, Store(data=too_big))


def test_bulk_enqueues_store_every_value_exactly(engine: sa.Engine, models: Any) -> None:
    """The bulk insert's one JSON document: payloads, keys and odd strings come back as they went in."""
    queue = Queue(models, [Store, Keyed])
    odd = "é€😀 \"quoted\" \\ \n\t/"
    data = [{"ints": [MIN_INT, MAX_INT], "text": odd, "float": 0.1, "none": None, "deep": nested(10)},
            {"empty": {}, "list": []}, odd, 7]
    with Session(engine) as session, session.begin():
        ids = queue.enqueue_many(session, [Store(data=d) for d in data], ids_only=True)
        jobs = [j.id for j in queue.enqueue_many(session, [Store(data=d) for d in data] + [Keyed(data=odd)])]
    assert [queue.get_job(engine, i).payload for i in ids] == [{"data": d} for d in data]
    assert [queue.get_job(engine, j).payload for j in jobs] == [{"data": d} for d in data + [odd]]
    assert queue.get_job(engine, jobs[-1]).dedup_key == odd


def test_a_bulk_enqueue_over_the_document_bound_goes_in_parts(engine: sa.Engine, models: Any,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """A jsonb value holds 256 MiB: a batch whose document would be longer is sent in parts, all in order."""
    from venturi_sa.storage import job_documents

    queue = Queue(models, [Store])
    monkeypatch.setattr(job_documents, "MAX_DOCUMENT_CHARS", 300)
    data = [f"payload {i:03} " + "x" * 40 for i in range(12)]
    rows = [[f"id{i}", "store", {"data": d}, 1, None] for i, d in enumerate(data)]
    documents = job_documents.documents([tuple(r) for r in rows])
    assert len(documents) > 2 and all(len(d) <= 300 for d in documents), documents
    assert [row for d in documents for row in json.loads(d)] == rows
    with Session(engine) as session, session.begin():
        ids = queue.enqueue_many(session, [Store(data=d) for d in data], ids_only=True)
        jobs = [j.id for j in queue.enqueue_many(session, [Store(data=d) for d in data])]
    for got in (ids, jobs):
        assert [queue.get_job(engine, i).payload for i in got] == [{"data": d} for d in data]


def test_jsonb_keeps_long_integers_but_python_json_cannot_read_them_back(engine: sa.Engine) -> None:
    """Why integers stop at 64 bits: JSONB would keep 5000 digits, Python's json reader refuses them."""
    digits = "9" * 5000
    with engine.connect() as conn:
        stored = conn.execute(sa.text("SELECT (CAST(:doc AS jsonb) ->> 'n')"), {"doc": f'{{"n": {digits}}}'}).scalar()
        text = conn.execute(sa.text("SELECT CAST(CAST(:doc AS jsonb) AS text)"), {"doc": f'{{"n": {digits}}}'}).scalar()
        bigint = conn.execute(sa.text("SELECT CAST(CAST(:doc AS jsonb) ->> 'n' AS bigint)"),
                              {"doc": f'{{"n": {MAX_INT}}}'}).scalar()
    assert stored == digits and bigint == MAX_INT
    with pytest.raises(ValueError, match="digits"):
        json.loads(text)


def test_a_database_refusal_never_carries_the_payload_into_the_error(engine: sa.Engine, models: Any) -> None:
    """Past the checks (the storage verbs themselves): the driver's message would quote the JSON."""
    secret = "hunter2-secret"
    bad = NewJob(id="bad", kind="store", payload={"s": f"\ud800{secret}"}, priority=1)
    with Session(engine) as session:
        for write in (insert_jobs, insert_rows):
            with pytest.raises(InvalidPayload, match="SQLSTATE 22") as raised:
                write(models, session, InsertParams(jobs=NewJobColumns.of([bad]) if write is insert_rows
                                                    else [bad]))
            assert secret not in str(raised.value) and raised.value.__suppress_context__
            session.rollback()
    with Session(engine) as session, session.begin():
        insert_jobs(models, session, InsertParams(jobs=[NewJob(id="dup", kind="store", payload={}, priority=1)]))
    with Session(engine) as session:
        again = NewJob(id="dup", kind="store", payload={"s": secret}, priority=1)
        with pytest.raises(sa.exc.IntegrityError) as integrity:
            insert_jobs(models, session, InsertParams(jobs=[again, again]))
        assert secret not in str(integrity.value) and "hidden" in str(integrity.value)
    assert count(engine, models.jobs_table) == 1


def test_edit_refuses_what_enqueue_refuses_and_changes_nothing(engine: sa.Engine, models: Any,
                                                               queue: Queue) -> None:
    with Session(engine) as session, session.begin():
        job_id = queue.enqueue(session, Store(data="before")).id
    before = queue.get_job(engine, job_id)
    refused: list[tuple[dict[str, Any], type[VenturiError], str]] = [
        ({"payload": {"data": nested(5000)}}, InvalidPayload, "levels"),
        ({"payload": {"data": "x" * SMALL}}, InvalidPayload, "bytes as JSON"),
        ({"payload": {"data": 2**64}}, InvalidPayload, "data"),
        ({"payload": {"data": "\ud800"}}, InvalidPayload, "surrogate"),
        ({"delay": timedelta.max}, InvalidOption, "delay"),
        ({"run_at": datetime(1, 1, 1, tzinfo=UTC)}, InvalidOption, "run_at"),
    ]
    for change, error, text in refused:
        with pytest.raises(error, match=text):
            queue.edit(engine, job_id, **change)
    after = queue.get_job(engine, job_id)
    assert (after.payload, after.visible_at) == (before.payload, before.visible_at)
    assert count(engine, f"{models.prefix}_journal") == 0
    with pytest.raises(InvalidOption, match="delay"):
        queue.pause(engine, "store", delay=timedelta.max)


def test_a_job_added_to_the_session_is_held_to_its_queues_bound(engine: sa.Engine, models: Any) -> None:
    Queue(models, [Store], check_added_jobs=True, max_payload_bytes=SMALL)
    with Session(engine) as session:
        session.add(models.Job(kind="store", payload={"data": "x" * SMALL}))
        with pytest.raises(InvalidPayload, match="payload of 'store' is .* over the 4,096-byte bound"):
            session.flush()
        session.rollback()
        session.add(models.Job(kind="store", payload={"data": [nested(MAX_DEPTH)]}))
        with pytest.raises(InvalidPayload, match="levels"):
            session.flush()
        session.rollback()
    assert count(engine, models.jobs_table) == 0
