"""The bounds on stored JSON and on times, checked without a database (issue 24 items 4 and 7).

The same refusals against the real database, with nothing written, are in
tests/integration/enqueue/test_enqueue_bounds.py; the time limit's bound (issue 23
#9) in tests/unit/worker/test_timeout_bound.py.
"""

from __future__ import annotations

import enum
from collections import OrderedDict
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from marshmallow import Schema, fields

from venturi_sa import InvalidOption, InvalidPayload, Queue, Task, make_models
from venturi_sa.declarations.time_checks import check_delay, check_run_at
from venturi_sa.storage.params import ClaimedJob, Fence
from venturi_sa.worker.checkpoint import Checkpointer
from venturi_sa.worker.context import JobContext  # the worker's class: these tests build one

UTC = timezone.utc


# -- times ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("value", [timedelta.max, timedelta(days=36526)])
def test_a_delay_past_100_years_is_refused(value: timedelta) -> None:
    with pytest.raises(InvalidOption, match="delay must be at most 36525 days"):
        check_delay(value)


@pytest.mark.parametrize("value", [
    datetime(1, 1, 1, tzinfo=UTC),
    datetime.now(UTC) - timedelta(days=366),
    datetime.now(UTC) + timedelta(days=36530),
    datetime(9999, 12, 31, tzinfo=UTC),
    datetime.min.replace(tzinfo=timezone(timedelta(hours=23))),  # out of range once converted to UTC
])
def test_a_run_at_outside_a_year_ago_to_100_years_ahead_is_refused(value: datetime) -> None:
    with pytest.raises(InvalidOption, match="run_at must be between one year ago and 100 years from now"):
        check_run_at(value)


def test_times_inside_the_bounds_pass() -> None:
    now = datetime.now(UTC)
    assert check_run_at(now - timedelta(days=300)) is not None
    assert check_run_at(now + timedelta(days=36000)) is not None
    assert check_run_at(datetime(2000, 1, 1, tzinfo=UTC), "until", past=False) is not None
    assert check_delay(timedelta(0)) == timedelta(0)
    with pytest.raises(InvalidOption, match="positive"):
        check_delay(timedelta(0), positive=True)


# -- stored JSON ---------------------------------------------------------------------------------------------
class Blob(Schema):
    data = fields.Raw(required=True)


class Store(Task):
    KIND = "store"
    Payload = Blob


def nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = {"a": value}
    return value


@pytest.mark.parametrize(("value", "where", "reason"), [
    (nested(65), ".".join("a" * 64), "more than 64 levels"),
    (nested(5000), ".".join("a" * 64), "more than 64 levels"),
    ({"k" * 1000: {"s": "\x00"}}, "k" * 37 + "....s", "NUL"),
    ({"n": [0, 2**63]}, "n[1]", "64-bit"),
    ({"n": -(2**63) - 1}, "n", "64-bit"),
    ({"n": 10**5000}, "n", "an integer of 16610 bits"),
    ({"s": "a\ud800b"}, "s", "lone surrogate ('\\ud800') at character 1"),
    ({"é\udc00": 1}, "é\\udc00", "lone surrogate"),
    ({"s": "a\x00"}, "s", "NUL"),
    ([(1, 2)], "[0]", "tuple is not JSON"),
    ({1: 2}, "1", "keys must be strings"),
])
def test_what_jsonb_cannot_keep_exactly_is_refused_naming_the_field(value: Any, where: str, reason: str) -> None:
    from venturi_sa.payloads import ensure_json

    with pytest.raises(InvalidPayload) as raised:
        ensure_json(value, "payload of 'x'")
    assert f"payload of 'x' is not JSON-serializable at {where}: " in str(raised.value)
    assert reason in str(raised.value) and raised.value.fields == {where: [raised.value.fields[where][0]]}
    assert len(str(raised.value)) < 500


class Level(enum.IntEnum):
    ONE = 1


def test_values_at_the_bounds_pass() -> None:
    from venturi_sa.payloads import MAX_DEPTH, MAX_INT, MIN_INT, ensure_json

    value = {"deep": nested(MAX_DEPTH - 1), "ints": [MIN_INT, MAX_INT], "enum": Level.ONE,
             "ordered": OrderedDict(a=1), "text": "é😀"}
    assert ensure_json(value, "payload") is value


def test_the_size_bound_names_the_size_and_counts_utf8() -> None:
    from venturi_sa.payloads import ensure_json, json_size

    assert json_size({"s": "é"}, "x") == len('{"s":"é"}'.encode())
    assert json_size([1, "ab", None, True, 1.5], "x") == len('[1,"ab",null,true,1.5]')
    ensure_json({"s": "x" * 90}, "x", max_bytes=100)
    with pytest.raises(InvalidPayload, match=r"attachment is 1,008 bytes as JSON, over the 1,000-byte bound"):
        ensure_json({"s": "é" * 500}, "attachment", max_bytes=1000)
    with pytest.raises(InvalidPayload, match="over the 1,048,576-byte bound"):
        ensure_json("x" * 300_000_000, "payload")  # 300 MB: refused without encoding it


def test_enqueue_refuses_a_payload_over_the_queues_bound_naming_it() -> None:
    queue = Queue(make_models("bounds"), [Store], max_payload_bytes=1000)
    with pytest.raises(InvalidPayload, match=r"payload of 'store' is 1,01\d bytes as JSON, over the 1,000-byte"):
        queue.job(Store(data="x" * 1000))
    queue.job(Store(data="x" * 900))
    with pytest.raises(InvalidPayload, match="over the 1,048,576-byte bound"):
        Queue(make_models("bounds2"), [Store]).job(Store(data="x" * 1024 * 1024))


@pytest.mark.parametrize("bound", [0, -1, 1.5, True, "1MB", None])
def test_max_payload_bytes_must_be_a_positive_integer(bound: object) -> None:
    with pytest.raises(InvalidOption, match="max_payload_bytes must be a positive integer"):
        Queue(make_models("badbound"), [], max_payload_bytes=bound)  # type: ignore[arg-type]


def _claimed(carry: Any = None) -> ClaimedJob:
    return ClaimedJob(id="j1", kind="store", payload={}, carry=carry, priority=1, created_at=datetime.now(UTC),
                      run_count=1, failure_count=0, claimed_by="w")


def test_an_attachment_over_the_runs_bound_is_refused_and_the_old_one_kept() -> None:
    ctx = JobContext(_claimed(), None, lambda: None, max_payload_bytes=100)  # type: ignore[arg-type, return-value]
    ctx.set_attachment({"ok": 1})
    with pytest.raises(InvalidPayload, match="attachment is .* over the 100-byte bound"):
        ctx.set_attachment({"big": "x" * 100})
    with pytest.raises(InvalidPayload, match="more than 64 levels"):
        ctx.set_attachment(nested(5000))
    assert ctx.attachment == {"ok": 1}
    assert ctx.fresh().max_payload_bytes == 100


def test_a_checkpoint_over_the_runs_bound_is_refused_and_the_carry_kept() -> None:
    job = _claimed({"step": 1})
    ctx = JobContext(job, {"step": 1}, lambda: None, max_payload_bytes=100)  # type: ignore[arg-type, return-value]
    ctx.checkpointer = Checkpointer(Fence(job_id="j1", kind="store", claimed_by="w", run_count=1), None)
    with pytest.raises(InvalidPayload, match="checkpoint carry is .* over the 100-byte bound"):
        ctx.checkpoint({"step": "x" * 200})
    with pytest.raises(InvalidPayload, match="checkpoint carry is not JSON-serializable at n: an integer"):
        ctx.checkpoint({"n": 2**70})
    assert ctx.carry == {"step": 1}
    ctx.checkpoint({"step": 2})  # within the bound: kept (no database here, so nothing is written)
    assert ctx.carry == {"step": 2}


class Flat(Schema):
    n = fields.Integer(required=True)
    s = fields.String(required=True)


@pytest.mark.parametrize(("data", "text"), [
    ({"n": 2**63, "s": "ok"}, "at n: an integer of 64 bits"),
    ({"n": 1, "s": "\ud800"}, "at s: contains a lone surrogate"),
    ({"n": 1, "s": "\x00"}, "at s: contains a NUL"),
    ({"n": 1, "s": "é" * 600}, "over the 1,000-byte bound"),
    ({"n": 1, "s": "x" * 1000}, "over the 1,000-byte bound"),
])
def test_the_marshmallow_free_path_checks_the_same_bounds(data: dict[str, Any], text: str) -> None:
    from venturi_sa.payloads import dump, dump_many, unchanged_by

    schema = Flat()
    assert unchanged_by(schema, data)  # the path that skips marshmallow
    with pytest.raises(InvalidPayload, match=text):
        dump(schema, data, "payload", max_bytes=1000)
    with pytest.raises(InvalidPayload, match=text):
        dump_many(schema, [{"n": 1, "s": "fine"}, data], "payload", max_bytes=1000)
    assert dump(schema, {"n": 2**63 - 1, "s": "é" * 400}, "payload", max_bytes=1000) == {"n": 2**63 - 1,
                                                                                          "s": "é" * 400}
