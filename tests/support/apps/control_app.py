"""A worker process for the runtime-control tests.

``python control_app.py`` reads ``VENTURI_DSN``, ``VENTURI_PREFIX``,
``VENTURI_LISTEN`` (``1``/``0``) and ``VENTURI_LEASE`` (seconds, default 3:
a renewal every second).  It prints ``READY <pid>`` before the worker starts
and ``EXIT <pid> <processed>`` after it stopped (SIGTERM; ``support.processes.serve_worker``).  Kinds:

* ``hold``: writes a ``<prefix>_side`` row through ``ctx.session``, records a
  ``<prefix>_started`` row (committed at once), then waits for a cancel and
  records in ``<prefix>_seen`` the database time it saw it, then raises
  ``JobCancelled`` (a cooperative sync handler);
* ``mark``: writes a ``<prefix>_side`` row through ``ctx.session`` and completes.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from datetime import timedelta

import sqlalchemy as sa
from support.processes import serve_worker

from venturi_sa import JobContext, Queue, Task, Worker, make_models

WAIT = 60.0


def ddl(prefix: str) -> list[str]:
    return [f"CREATE TABLE IF NOT EXISTS {prefix}_{name} (job_id text NOT NULL, run_no int NOT NULL, "
            "at timestamptz NOT NULL DEFAULT clock_timestamp())" for name in ("side", "started", "seen")]


def build_queue(prefix: str, engine: sa.Engine, lease_seconds: float = 3.0) -> Queue:
    def record(table: str, ctx: JobContext) -> None:
        with engine.begin() as conn:
            conn.execute(sa.text(f"INSERT INTO {prefix}_{table} (job_id, run_no) VALUES (:j, :r)"),
                         {"j": ctx.job_id, "r": ctx.run_count})

    class Hold(Task):
        KIND = "hold"
        lease = timedelta(seconds=lease_seconds)

        def run(self, ctx: JobContext) -> None:
            ctx.session.execute(sa.text(f"INSERT INTO {prefix}_side (job_id, run_no) VALUES (:j, :r)"),
                                {"j": ctx.job_id, "r": ctx.run_count})
            record("started", ctx)
            if ctx.wait_cancelled(WAIT):
                record("seen", ctx)
            ctx.raise_if_cancelled()

    class Mark(Task):
        KIND = "mark"
        lease = timedelta(seconds=lease_seconds)

        def run(self, ctx: JobContext) -> None:
            ctx.session.execute(sa.text(f"INSERT INTO {prefix}_side (job_id, run_no) VALUES (:j, :r)"),
                                {"j": ctx.job_id, "r": ctx.run_count})

    return Queue(make_models(prefix), [Hold, Mark])


def main() -> int:
    def build(env: Mapping[str, str], engine: sa.Engine) -> Worker:
        queue = build_queue(env["VENTURI_PREFIX"], engine, float(env.get("VENTURI_LEASE", "3")))
        return Worker(queue, engine, concurrency=2, poll_interval=0.2, listen=env.get("VENTURI_LISTEN", "1") == "1",
                      grace=5.0)

    serve_worker(build)
    return 0


if __name__ == "__main__":
    sys.exit(main())
