"""A worker process for the runtime-control tests.

``python control_app.py`` reads ``VENTURI_DSN``, ``VENTURI_PREFIX``,
``VENTURI_LISTEN`` (``1``/``0``) and ``VENTURI_LEASE`` (seconds, default 3:
a renewal every second).  It prints ``READY <pid>`` before the worker starts
and ``EXIT <pid>`` after it stopped (SIGTERM).  Kinds:

* ``hold``: writes a ``<prefix>_side`` row through ``ctx.session``, records a
  ``<prefix>_started`` row (committed at once), then waits for a cancel and
  records in ``<prefix>_seen`` the database time it saw it, then raises
  ``JobCancelled`` (a cooperative sync handler);
* ``mark``: writes a ``<prefix>_side`` row through ``ctx.session`` and completes.
"""

from __future__ import annotations

import os
import sys
from datetime import timedelta
from pathlib import Path

import sqlalchemy as sa

if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from venturi_sa import JobContext, Queue, Task, Worker, make_models  # noqa: E402

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
    env = os.environ
    prefix = env["VENTURI_PREFIX"]
    engine = sa.create_engine(env["VENTURI_DSN"], pool_size=8, connect_args={"options": "-c timezone=UTC"})
    queue = build_queue(prefix, engine, float(env.get("VENTURI_LEASE", "3")))
    worker = Worker(queue, engine, concurrency=2, poll_interval=0.2, listen=env.get("VENTURI_LISTEN", "1") == "1",
                    grace=5.0)
    print(f"READY {os.getpid()}", flush=True)
    worker.run()
    print(f"EXIT {os.getpid()}", flush=True)
    engine.dispose()
    return 0


if __name__ == "__main__":
    sys.exit(main())
