"""The task model without a database: kinds, policy checks, payload validation, the registry."""

from __future__ import annotations

import math
from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from marshmallow import Schema, fields

from venturi_sa import (
    Coalesce,
    DuplicateKind,
    InvalidOption,
    InvalidPayload,
    JobContext,
    Priority,
    Registry,
    Task,
    UnknownKind,
    task,
)


class Order(Schema):
    order_id = fields.Integer(required=True)
    note = fields.String(load_default="")


class SendReceipt(Task):
    KIND = "send_receipt"
    Payload = Order

    def run(self, ctx: JobContext) -> None:
        pass


def test_priority_tiers() -> None:
    assert (Priority.HIGH, Priority.NORMAL, Priority.LOW) == (0, 1, 2)
    assert SendReceipt.priority == Priority.NORMAL


def test_task_validates_and_loads_its_payload() -> None:
    t = SendReceipt(order_id="7")
    assert t.payload == {"order_id": 7, "note": ""}
    assert t.stored_payload() == {"order_id": 7, "note": ""}
    assert SendReceipt.from_stored({"order_id": 7}).payload["order_id"] == 7


@pytest.mark.parametrize(("fields_", "field"), [({}, "order_id"), ({"order_id": "seven"}, "order_id"),
                                               ({"order_id": True}, "order_id"),
                                               ({"order_id": 1, "oops": 2}, "oops")])
def test_bad_payload_raises_naming_the_field(fields_: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidPayload) as info:
        SendReceipt(**fields_)
    assert field in info.value.fields and field in str(info.value)


def test_stored_payload_that_is_not_an_object() -> None:
    with pytest.raises(InvalidPayload, match="list"):
        SendReceipt.from_stored([1])


@pytest.mark.parametrize("value", [Decimal("1.1"), math.nan, math.inf, object(), {"a", "b"}])
def test_raw_fields_must_hold_json(value: Any) -> None:
    class Anything(Task):
        KIND = "anything"

        class Payload(Schema):
            data = fields.Raw()

    with pytest.raises(InvalidPayload, match="data"):
        Anything(data={"inner": value}).stored_payload()


def test_default_backoff_grows_and_is_capped() -> None:
    steps = [SendReceipt.backoff(n) for n in range(1, 30)]
    assert steps[0] == timedelta(seconds=2) and steps == sorted(steps)
    assert steps[-1] == timedelta(hours=1)


def test_default_dedup_and_merge() -> None:
    assert SendReceipt(order_id=1).dedup_key() is None

    class Existing:
        payload = {"order_id": 1, "note": "first"}

    assert SendReceipt(order_id=1).merge(Existing()) == Coalesce({"order_id": 1, "note": "first"})  # type: ignore[arg-type]


@pytest.mark.parametrize(("attrs", "needle"), [
    ({"KIND": "has space"}, "KIND"), ({"KIND": ""}, "KIND"), ({"KIND": 5}, "KIND"),
    ({"KIND": "k", "priority": 7}, "priority"), ({"KIND": "k", "max_failures": 0}, "max_failures"),
    ({"KIND": "k", "max_failures": True}, "max_failures"), ({"KIND": "k", "lease": 30}, "lease"),
    ({"KIND": "k", "lease": timedelta(0)}, "lease"), ({"KIND": "k", "concurrency": 0}, "concurrency"),
])
def test_bad_policy_is_refused_at_class_definition(attrs: dict[str, Any], needle: str) -> None:
    with pytest.raises(InvalidOption, match=needle):
        type("Bad", (Task,), attrs)


def test_registry_refuses_a_kind_twice_and_names_unknown_kinds() -> None:
    class Other(Task):
        KIND = "send_receipt"

    registry = Registry([SendReceipt])
    registry.register(SendReceipt)  # the same type again is harmless
    with pytest.raises(DuplicateKind, match="send_receipt"):
        registry.register(Other)
    with pytest.raises(UnknownKind, match="nope.*send_receipt"):
        registry.get("nope")
    with pytest.raises(InvalidOption):
        registry.register(int)  # type: ignore[arg-type]
    assert registry.kinds == ["send_receipt"] and "send_receipt" in registry


def test_decorated_function_style_is_a_task_type() -> None:
    calls: list[Any] = []

    @task("resize", payload=Order, max_failures=2, concurrency=3, backoff=lambda n: timedelta(seconds=n),
          dedup_key=lambda payload: f"order:{payload['order_id']}")
    def resize(payload: dict[str, Any], ctx: Any) -> None:
        """Resize the order's images."""
        calls.append((payload, ctx))

    assert issubclass(resize, Task) and resize.KIND == "resize"
    assert (resize.max_failures, resize.concurrency, resize.backoff(4)) == (2, 3, timedelta(seconds=4))
    job = resize(order_id=3)
    assert job.dedup_key() == "order:3"
    job.run("ctx")  # type: ignore[arg-type]
    assert calls == [({"order_id": 3, "note": ""}, "ctx")]
    assert resize.__doc__ == "Resize the order's images."
