"""Round 3, defects 8 and 10: ``SystemExit`` from user code is a recorded failure; any value ``json.dumps``
accepts is a result, and one that cannot be stored still completes the job."""

from __future__ import annotations

import sys
from typing import Any

import sqlalchemy as sa
from marshmallow import Schema, fields, post_load
from support.probes import running, settled
from support.workers import enqueue, journal

from venturi_sa import JobContext, Queue, Task, Worker


# Regression test of round 3's defect 8: failed on 748cf08 (SystemExit escaped the executor; the job
# stayed claimed until its lease expired).
def test_system_exit_in_a_handler_or_its_schema_is_a_recorded_failure(engine: sa.Engine, models: Any) -> None:
    class Exits(Task):
        KIND = "exits"
        max_failures = 1

        class Payload(Schema):
            how = fields.String(required=True)

        def run(self, ctx: JobContext) -> None:
            sys.exit(f"handler exits for {self.payload['how']}")

    class ExitsInSchema(Task):
        KIND = "exits_in_schema"
        max_failures = 1

        class Payload(Schema):
            n = fields.Integer(required=True)

            @post_load
            def leave(self, data: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
                if type(self).context_exit:
                    sys.exit(3)
                return data

            context_exit: bool = False

        def run(self, ctx: JobContext) -> None:
            pass

    queue = Queue(models, [Exits, ExitsInSchema])
    in_handler, in_schema = enqueue(engine, queue, Exits(how="a reason"), ExitsInSchema(n=1))
    ExitsInSchema.Payload.context_exit = True  # the worker's load of the stored payload now exits
    worker = Worker(queue, engine, poll_interval=0.2, listen=False)
    try:
        with running(worker):
            handler_row = settled(engine, models, in_handler, timeout=10)
            schema_row = settled(engine, models, in_schema, timeout=10)
    finally:
        ExitsInSchema.Payload.context_exit = False
    assert handler_row.status == "dead"
    assert "SystemExit" in (journal(engine, models, in_handler)[-1].note or "")
    assert schema_row.status == "dead"
    assert "SystemExit" in (journal(engine, models, in_schema)[-1].note or "")


# Regression test of round 3's defect 10: failed on 748cf08 (a tuple result was a retryable failure, so a
# handler that had sent its email was run again).
def test_any_json_dumps_value_is_a_result_and_an_unstorable_one_completes(engine: sa.Engine, models: Any) -> None:
    runs: list[str] = []

    class Sends(Task):
        KIND = "sends"

        class Payload(Schema):
            returns = fields.String(required=True)

        def run(self, ctx: JobContext) -> Any:
            runs.append(ctx.job_id)
            return {"tuple": ("sent", 200), "int_keys": {1: "a"}, "object": object()}[self.payload["returns"]]

    queue = Queue(models, [Sends])
    as_tuple, int_keys, unstorable = enqueue(engine, queue, Sends(returns="tuple"), Sends(returns="int_keys"),
                                             Sends(returns="object"))
    with running(Worker(queue, engine, poll_interval=0.2, listen=False)):
        rows = [settled(engine, models, j) for j in (as_tuple, int_keys, unstorable)]
    assert [r.status for r in rows] == ["completed"] * 3
    assert sorted(runs) == sorted([as_tuple, int_keys, unstorable])  # each ran once: nothing retried
    assert journal(engine, models, as_tuple)[-1].attachment == ["sent", 200]
    assert journal(engine, models, int_keys)[-1].attachment == {"1": "a"}
    last = journal(engine, models, unstorable)[-1]
    assert last.outcome == "completed" and last.attachment is None
    assert "return value was not stored" in (last.note or "")
