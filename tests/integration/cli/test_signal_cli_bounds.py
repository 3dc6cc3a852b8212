"""``venturi jobs signal`` with input past its bounds: one clear error line, no traceback, nothing written."""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa
from support.cli import fails, plain_url
from support.cli import invoke as run
from support.workers import enqueue

from venturi_sa import JobContext, Queue, Task

pytestmark = pytest.mark.timeout(60)


class Hold(Task):
    KIND = "cli_hold"

    def run(self, ctx: JobContext) -> Any:
        return ctx.wait_for("go", timeout=60)


def test_a_deeply_nested_or_oversized_payload_and_a_bad_id_are_one_error_line(pg_url: str, prefix: str,
                                                                              engine: sa.Engine,
                                                                              models: Any) -> None:
    db = ["--dsn", plain_url(pg_url), "--prefix", prefix]
    queue = Queue(models, [Hold])
    [job_id] = enqueue(engine, queue, Hold())
    deep = run("jobs", "signal", *db, job_id, "go", "--payload", "[" * 10_000 + "]" * 10_000)
    assert deep.exit_code == 2  # click's usage error
    fails(deep, "nested too deeply", "64 levels")
    fails(run("jobs", "signal", *db, job_id, "go", "--payload", "[" * 100 + "]" * 100), "64 levels deep")
    fails(run("jobs", "signal", *db, "01HZZ\x00", "go"), "must be a ULID")
    assert queue.signals(engine, job_id) == []
