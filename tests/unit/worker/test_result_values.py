"""A handler's returned JSON value is the job's result: ``Complete`` with the value as the attachment."""

from __future__ import annotations

import logging
from datetime import date, datetime, timezone
from decimal import Decimal
from typing import Any

import pytest
from marshmallow import Schema

from venturi_sa import Complete, Outcome, Task
from venturi_sa.storage.params import ClaimedJob
from venturi_sa.task import Registry
from venturi_sa.worker.context import JobContext  # the worker's class: these tests build one
from venturi_sa.worker.pipeline import decide
from venturi_sa.worker.run import Run


class Returns(Task):
    KIND = "returns"
    max_failures = 3
    value: Any = None
    attach: Any = None

    class Payload(Schema):
        pass

    def run(self, ctx: JobContext) -> Any:
        if Returns.attach is not None:
            ctx.set_attachment(Returns.attach)
        return Returns.value


def run_returning(value: Any, attach: Any = None) -> Any:
    Returns.value, Returns.attach = value, attach
    claimed = ClaimedJob(id="01J0000000000000000000000A", kind="returns", payload={}, carry=None, priority=1,
                         created_at=datetime.now(timezone.utc), run_count=1, failure_count=0,
                         claimed_by="host:1")
    ctx = JobContext(claimed, None, lambda: pytest.fail("no session in unit tests"),
                     logging.LoggerAdapter(logging.getLogger("test"), {}))
    run = Run(job=claimed, ctx=ctx)
    decide(run, Registry([Returns]))
    assert run.params is not None
    return run.params


@pytest.mark.parametrize("value", [{"sent": 3, "ids": [1, 2]}, [1, "two"], "ok", 42, 1.5, True, False, 0, ""])
def test_a_json_value_completes_with_it_as_the_attachment(value: Any) -> None:
    params = run_returning(value)
    assert (params.outcome, params.failure, params.note) == (Outcome.COMPLETED, False, None)
    assert params.attachment == value and type(params.attachment) is type(value)


@pytest.mark.parametrize(("value", "stored"), [
    ((1, 2), [1, 2]),
    ({"pair": ("sent", 200)}, {"pair": ["sent", 200]}),
    ({1: "x"}, {"1": "x"}),
])
def test_a_value_json_dumps_accepts_is_the_result_as_json_writes_it(value: Any, stored: Any) -> None:
    params = run_returning(value)
    assert (params.outcome, params.failure, params.note) == (Outcome.COMPLETED, False, None)
    assert params.attachment == stored


@pytest.mark.parametrize(("value", "why"), [
    ({1, 2}, "set is not JSON"),
    (datetime(2030, 1, 1, tzinfo=timezone.utc), "datetime is not JSON"),
    (date(2030, 1, 1), "date is not JSON"),
    ({"total": Decimal("1.5")}, "at total: Decimal is not JSON"),
    (float("nan"), "not a finite number"),
])
def test_a_value_that_cannot_be_stored_completes_without_it_never_retried(value: Any, why: str) -> None:
    params = run_returning(value)
    assert (params.outcome, params.failure) == (Outcome.COMPLETED, False)
    assert "return value was not stored" in params.note and why in params.note
    assert params.attachment is None


def test_the_returned_value_replaces_an_attachment_set_by_the_handler() -> None:
    params = run_returning({"result": 1}, attach={"evidence": "x"})
    assert (params.outcome, params.attachment) == (Outcome.COMPLETED, {"result": 1})


def test_none_and_complete_keep_the_attachment_set_by_the_handler() -> None:
    assert run_returning(None, attach={"evidence": "x"}).attachment == {"evidence": "x"}
    assert run_returning(Complete("done"), attach={"evidence": "y"}).attachment == {"evidence": "y"}


