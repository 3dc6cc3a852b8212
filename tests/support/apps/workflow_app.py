"""A worker application with dependent jobs (``after=``), run as a real process by the acceptance tests.

``python workflow_app.py`` reads ``VENTURI_DSN``, ``VENTURI_PREFIX``,
``VENTURI_CONCURRENCY`` (default 4) and ``VENTURI_LEASE`` seconds (default
60), like ``worker_app``.  Two kinds:

* ``step`` (payload ``n``, ``mode``): writes one ``<prefix>_side`` row through
  ``ctx.session`` (committed with its outcome, so exactly once per completed
  run) and returns ``{"n": n}``; ``mode="die"`` returns ``Die`` instead,
  ``mode="block_once"`` first records a ``<prefix>_started`` row in its own
  transaction and blocks on run 1 (until the process is killed).
* ``gather``: reads ``ctx.parents`` and writes one ``<prefix>_gathered`` row
  with how many parents it saw, how many were terminal, and the sum of their
  results' ``n``.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

import sqlalchemy as sa
from marshmallow import Schema, fields
from support.processes import serve_worker

from venturi_sa import Die, JobContext, Queue, Task, Worker, make_models


class StepPayload(Schema):
    n = fields.Integer(load_default=0)
    mode = fields.String(load_default="ok")


def ddl(prefix: str) -> list[str]:
    """The app's own tables (no unique constraints: a doubled run would show as a second row)."""
    return [f"CREATE TABLE IF NOT EXISTS {prefix}_side (job_id text NOT NULL, n int NOT NULL, pid int NOT NULL, "
            "at timestamptz NOT NULL)",
            f"CREATE TABLE IF NOT EXISTS {prefix}_started (job_id text NOT NULL, pid int NOT NULL)",
            f"CREATE TABLE IF NOT EXISTS {prefix}_gathered (job_id text NOT NULL, parents int NOT NULL, "
            "terminal int NOT NULL, total int NOT NULL, pid int NOT NULL, at timestamptz NOT NULL)"]


def build_queue(prefix: str, engine: sa.Engine, lease_seconds: float = 60.0) -> Queue:
    """The app's queue; the tests import it to enqueue."""

    class Step(Task):
        KIND = "step"
        Payload = StepPayload
        lease = timedelta(seconds=lease_seconds)

        def run(self, ctx: JobContext) -> Any:
            n, mode = self.payload["n"], self.payload["mode"]
            if mode == "die":
                return Die("died on purpose")
            if mode == "block_once" and ctx.run_count == 1:
                with engine.begin() as conn:
                    conn.execute(sa.text(f"INSERT INTO {prefix}_started VALUES (:j, :p)"),
                                 {"j": ctx.job_id, "p": os.getpid()})
                time.sleep(120)  # until killed
            ctx.session.execute(sa.text(f"INSERT INTO {prefix}_side VALUES (:j, :n, :p, clock_timestamp())"),
                                {"j": ctx.job_id, "n": n, "p": os.getpid()})
            return {"n": n}

    class Gather(Task):
        KIND = "gather"
        lease = timedelta(seconds=lease_seconds)

        def run(self, ctx: JobContext) -> None:
            parents = ctx.parents
            terminal = sum(1 for p in parents if p.status in ("completed", "dead"))
            total = sum(p.result["n"] for p in parents if p.result is not None)
            ctx.session.execute(sa.text(
                f"INSERT INTO {prefix}_gathered VALUES (:j, :c, :t, :s, :p, clock_timestamp())"),
                {"j": ctx.job_id, "c": len(parents), "t": terminal, "s": total, "p": os.getpid()})

    return Queue(make_models(prefix), [Step, Gather])


def main() -> int:
    prefix, concurrency = os.environ["VENTURI_PREFIX"], int(os.environ.get("VENTURI_CONCURRENCY", "4"))

    def build(env: Mapping[str, str], engine: sa.Engine) -> Worker:
        queue = build_queue(prefix, engine, float(env.get("VENTURI_LEASE", "60")))
        return Worker(queue, engine, concurrency=concurrency, poll_interval=0.5, recover_interval=0.3)

    serve_worker(build, pool_size=concurrency + 4, max_overflow=10, application_name=f"workflow-app-{prefix}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
