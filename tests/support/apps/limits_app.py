"""A worker process for the limits tests.

``python limits_app.py`` reads ``VENTURI_DSN`` and ``VENTURI_PREFIX``; it
prints ``READY <pid>`` before the worker starts (``support.processes.serve_worker``).
Every handler records its run in ``<prefix>_spans`` (job id, kind, key, run
number, start and end on the database clock, each committed at once). Kinds:

* ``partner``: ``global_concurrency = 2``; holds its slot for a short while;
* ``export``: ``key_concurrency = 1`` by the payload's ``tenant``;
* ``fair``: ``global_concurrency = 1`` with a ``limit_key`` (the tenant), no key limit;
* ``plain``: no declared limit (the tests override it at runtime);
* ``stuck``: ``global_concurrency = 1``, lease 2 s; with ``hold`` its first
  run never ends by itself (the test SIGKILLs its process); other runs complete.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Mapping
from datetime import timedelta

import sqlalchemy as sa
from marshmallow import Schema, fields
from support.processes import serve_worker

from venturi_sa import JobContext, Queue, Task, Worker, make_models

HOLD = 0.05  # seconds a handler keeps its slot: work, not synchronization


def ddl(prefix: str) -> list[str]:
    return [f"CREATE TABLE IF NOT EXISTS {prefix}_spans (job_id text NOT NULL, kind text NOT NULL, key text, "
            "run_no int NOT NULL, started timestamptz NOT NULL DEFAULT clock_timestamp(), ended timestamptz)"]


class Tenant(Schema):
    tenant = fields.String(load_default="")


class Held(Schema):
    hold = fields.Boolean(load_default=False)


def build_queue(prefix: str, engine: sa.Engine) -> Queue:
    def span(ctx: JobContext, key: str | None, hold: float) -> None:
        with engine.begin() as conn:
            conn.execute(sa.text(f"INSERT INTO {prefix}_spans (job_id, kind, key, run_no) VALUES (:j, :k, :key, :r)"),
                         {"j": ctx.job_id, "k": ctx.kind, "key": key, "r": ctx.run_count})
        time.sleep(hold)
        with engine.begin() as conn:
            conn.execute(sa.text(f"UPDATE {prefix}_spans SET ended = clock_timestamp() "
                                 "WHERE job_id = :j AND run_no = :r"), {"j": ctx.job_id, "r": ctx.run_count})

    class Partner(Task):
        KIND = "partner"
        global_concurrency = 2

        def run(self, ctx: JobContext) -> None:
            span(ctx, None, HOLD)

    class Export(Task):
        KIND = "export"
        Payload = Tenant
        key_concurrency = 1

        def limit_key(self) -> str | None:
            return str(self.payload["tenant"]) or None

        def run(self, ctx: JobContext) -> None:
            span(ctx, self.limit_key(), HOLD)

    class Fair(Task):
        KIND = "fair"
        Payload = Tenant
        global_concurrency = 1

        def limit_key(self) -> str | None:
            return str(self.payload["tenant"]) or None

        def run(self, ctx: JobContext) -> None:
            span(ctx, self.limit_key(), 0)

    class Plain(Task):
        KIND = "plain"

        def run(self, ctx: JobContext) -> None:
            span(ctx, None, HOLD)

    class Stuck(Task):
        KIND = "stuck"
        Payload = Held
        global_concurrency = 1
        lease = timedelta(seconds=2)

        def run(self, ctx: JobContext) -> None:
            if self.payload["hold"] and ctx.run_count == 1:
                with engine.begin() as conn:
                    conn.execute(sa.text(f"INSERT INTO {prefix}_spans (job_id, kind, run_no) VALUES (:j, :k, :r)"),
                                 {"j": ctx.job_id, "k": ctx.kind, "r": ctx.run_count})
                ctx.wait_cancelled(120)  # until its process is killed
                return
            span(ctx, None, 0)

    return Queue(make_models(prefix), [Partner, Export, Fair, Plain, Stuck])


def app() -> Queue:
    """The queue of ``VENTURI_PREFIX`` for ``venturi limits ... --app limits_app:app`` (no handler runs there)."""
    return build_queue(os.environ["VENTURI_PREFIX"], sa.create_engine(os.environ["VENTURI_DSN"]))


def main() -> int:
    def build(env: Mapping[str, str], engine: sa.Engine) -> Worker:
        return Worker(build_queue(env["VENTURI_PREFIX"], engine), engine, concurrency=4, poll_interval=0.1,
                      grace=5.0)

    serve_worker(build)
    return 0


if __name__ == "__main__":
    sys.exit(main())
