"""A worker application for the acceptance tests, run as a real process.

``python worker_app.py`` reads its settings from the environment:

* ``VENTURI_DSN``, ``VENTURI_PREFIX`` (required);
* ``VENTURI_MODE``: ``run`` (``Worker.run()``, until SIGTERM/SIGINT) or ``idle`` (``run_until_idle()``);
* ``VENTURI_CONCURRENCY`` (default 4), ``VENTURI_LEASE`` seconds (default 60),
  ``VENTURI_GRACE`` seconds (default 30).

It prints ``READY <pid>`` to stdout once the worker is about to start, and
``EXIT <pid> <processed>`` when it returns (``support.processes.serve_worker``).  The single task kind ``work``
writes one row to ``<prefix>_side`` through ``ctx.session`` (so the row
commits with the outcome, exactly once), and, depending on its payload's
``mode``, first records a ``<prefix>_started`` row in its own committed
transaction and blocks (``block``: every run; ``block_once``: run 1 only).
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

from venturi_sa import Complete, JobContext, Queue, Task, Worker, make_models


class WorkPayload(Schema):
    n = fields.Integer(load_default=0)
    mode = fields.String(load_default="ok")


def ddl(prefix: str) -> list[str]:
    """The tables the app writes to; neither has a unique constraint."""
    return [f"CREATE TABLE IF NOT EXISTS {prefix}_side (job_id text NOT NULL, run_no int NOT NULL, "
            "pid int NOT NULL)",
            f"CREATE TABLE IF NOT EXISTS {prefix}_started (job_id text NOT NULL, run_no int NOT NULL, "
            "pid int NOT NULL)"]


def app_name(prefix: str) -> str:
    """The ``application_name`` of the app's connections (visible in ``pg_stat_activity``)."""
    return f"worker-app-{prefix}"


def build_queue(prefix: str, engine: sa.Engine, lease_seconds: float = 60.0) -> Queue:
    """The app's queue; the tests import it to enqueue ``work`` jobs."""

    class Work(Task):
        KIND = "work"
        Payload = WorkPayload
        lease = timedelta(seconds=lease_seconds)

        def run(self, ctx: JobContext) -> Complete:
            row = {"j": ctx.job_id, "r": ctx.run_count, "p": os.getpid()}
            mode = self.payload["mode"]
            if mode == "block" or (mode == "block_once" and ctx.run_count == 1):
                with engine.begin() as conn:
                    conn.execute(sa.text(f"INSERT INTO {prefix}_started VALUES (:j, :r, :p)"), row)
                time.sleep(120)  # until killed or released
            ctx.session.execute(sa.text(f"INSERT INTO {prefix}_side VALUES (:j, :r, :p)"), row)
            return Complete()

    return Queue(make_models(prefix), [Work])


def main() -> int:
    prefix, concurrency = os.environ["VENTURI_PREFIX"], int(os.environ.get("VENTURI_CONCURRENCY", "4"))

    def build(env: Mapping[str, str], engine: sa.Engine) -> Worker:
        queue = build_queue(prefix, engine, float(env.get("VENTURI_LEASE", "60")))
        return Worker(queue, engine, concurrency=concurrency, poll_interval=0.5,
                      grace=float(env.get("VENTURI_GRACE", "30")), recover_interval=0.3)

    serve_worker(build, pool_size=concurrency + 4, max_overflow=10, application_name=app_name(prefix))
    return 0


if __name__ == "__main__":
    sys.exit(main())
