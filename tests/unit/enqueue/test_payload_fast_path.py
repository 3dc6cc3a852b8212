"""Skipping marshmallow where it cannot change the data: same result, same errors, only then."""

from __future__ import annotations

from typing import Any

import pytest
from marshmallow import Schema, fields, post_load, pre_dump, validate

from venturi_sa import payloads
from venturi_sa.errors import InvalidPayload


class Plain(Schema):
    n = fields.Integer(required=True)
    name = fields.String()
    flag = fields.Boolean()


class Hooked(Schema):
    n = fields.Integer(required=True)

    @post_load
    def doubled(self, data: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        return {"n": data["n"] * 2}


class Dumping(Schema):
    n = fields.Integer(required=True)

    @pre_dump
    def tagged(self, data: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        return {"n": data["n"] + 1}


class Validated(Schema):
    n = fields.Integer(required=True, validate=validate.Range(min=0))


class Renamed(Schema):
    n = fields.Integer(required=True, data_key="number")


class Defaulted(Schema):
    n = fields.Integer(required=True)
    mode = fields.String(load_default="ok")


class Converting(Schema):
    when = fields.Date()
    ratio = fields.Float()


@pytest.mark.parametrize("data", [{"n": 1}, {"n": 1, "name": "x", "flag": True}, {"n": -5, "flag": False}])
def test_plain_data_loads_and_dumps_as_marshmallow_does(data: dict[str, Any]) -> None:
    schema = Plain()
    assert payloads.unchanged_by(schema, data)
    loaded = payloads.load(schema, data, "payload")
    assert loaded == schema.load(data) and loaded is not data
    assert payloads.dump(schema, loaded, "payload") == schema.dump(loaded)


@pytest.mark.parametrize("data", [{"n": "5"}, {"n": True}, {"n": 1.0}, {"n": 1, "zz": 2}, {}, {"name": "x"},
                                  {"n": None}, [1], "x"])
def test_data_marshmallow_would_change_or_refuse_takes_the_full_path(data: Any) -> None:
    schema = Plain()
    assert not payloads.unchanged_by(schema, data)
    try:
        expected: Any = schema.load(data)
    except Exception as exc:  # noqa: BLE001 - compared with venturi's error below
        with pytest.raises(InvalidPayload):
            payloads.load(schema, data, "payload")
        assert exc is not None
    else:
        assert payloads.load(schema, data, "payload") == expected


@pytest.mark.parametrize("schema", [Hooked(), Dumping(), Validated(), Renamed(), Defaulted(), Converting(),
                                    Plain(only=("n",)), Plain(partial=True), Plain(many=True),
                                    Plain(unknown="exclude")])
def test_schemas_that_can_change_the_data_always_run_marshmallow(schema: Schema) -> None:
    assert not payloads.unchanged_by(schema, {"n": 1})


def test_hooks_and_validators_still_run() -> None:
    assert payloads.load(Hooked(), {"n": 2}, "payload") == {"n": 4}
    assert payloads.dump(Dumping(), {"n": 2}, "payload") == {"n": 3}
    with pytest.raises(InvalidPayload, match="n"):
        payloads.load(Validated(), {"n": -1}, "payload")
    assert payloads.load(Defaulted(), {"n": 1}, "payload") == {"n": 1, "mode": "ok"}


def test_a_nul_in_a_plain_string_is_refused_at_dump() -> None:
    with pytest.raises(InvalidPayload, match="NUL"):
        payloads.dump(Plain(), {"n": 1, "name": "a\x00b"}, "payload")


def test_dump_many_gives_what_dump_gives_each_value_in_order() -> None:
    import datetime

    mixed: list[Any] = [{"n": 1}, {"n": 2, "name": "x"}, {"n": 3, "name": "a", "flag": True}]
    assert payloads.dump_many(Plain(), mixed, "payload") == [payloads.dump(Plain(), v, "payload") for v in mixed]
    converting = [{"when": datetime.date(2030, 1, 2)}, {"ratio": 0.5}, {}]
    assert payloads.dump_many(Converting(), converting, "payload") == [
        payloads.dump(Converting(), v, "payload") for v in converting]
    assert payloads.dump_many(Dumping(), [{"n": 1}, {"n": 5}], "payload") == [{"n": 2}, {"n": 6}]
    assert payloads.dump_many(Plain(), [], "payload") == []


def test_dump_many_refuses_what_dump_refuses() -> None:
    with pytest.raises(InvalidPayload, match="NUL"):
        payloads.dump_many(Plain(), [{"n": 1}, {"n": 1, "name": "a\x00b"}], "payload")

    class Loose(Schema):
        value = fields.Raw()

    with pytest.raises(InvalidPayload, match="not JSON-serializable at value"):
        payloads.dump_many(Loose(), [{"value": 1}, {"value": float("nan")}], "payload")


def test_a_flat_payload_at_the_bound_is_counted_exactly() -> None:
    """The quick check counts every integer at its longest; a payload it cannot pass is counted exactly."""
    import json

    schema = Schema.from_dict({f"k{i}": fields.Integer() for i in range(10)})()
    data = {f"k{i}": i for i in range(10)}
    exact = len(json.dumps(data, separators=(",", ":")))
    for dump in (payloads.dump, lambda s, v, what, max_bytes: payloads.dump_many(s, [v], what, max_bytes)[0]):
        assert dump(schema, data, "payload", max_bytes=exact) == data
        with pytest.raises(InvalidPayload, match=f"is {exact:,} bytes as JSON, over the {exact - 1:,}-byte bound"):
            dump(schema, data, "payload", max_bytes=exact - 1)


@pytest.mark.parametrize("name", ["é", "a\x00b", "\ud800"])
def test_a_string_the_quick_check_cannot_pass_is_judged_by_the_full_one(name: str) -> None:
    for dump in (payloads.dump, lambda s, v, what: payloads.dump_many(s, [v], what)[0]):
        if name == "é":
            assert dump(Plain(), {"n": 1, "name": name}, "payload") == {"n": 1, "name": name}
        else:
            with pytest.raises(InvalidPayload, match="at name"):
                dump(Plain(), {"n": 1, "name": name}, "payload")
