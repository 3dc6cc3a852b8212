"""A worker application with durable steps, sleeps and waits, run as a real process by the acceptance tests.

``python steps_app.py`` reads ``VENTURI_DSN``, ``VENTURI_PREFIX``,
``VENTURI_CONCURRENCY`` (default 1) and ``VENTURI_LEASE`` seconds (default 2).
It prints ``READY <pid>`` once its worker is about to start
(``support.processes.serve_worker``).  Kinds:

* ``order``: charge -> ship -> email, each a ``ctx.step`` whose function
  records the external effect in ``<prefix>_effects`` (its own committed
  transaction, as a provider's API would, with ``ctx.step_key`` as the
  idempotency key).  Its payload's ``kill`` names a point where run 1 kills
  its own process with SIGKILL: ``in:<step>`` (the effect done, its record
  not written) or ``after:<step>`` (recorded).
* ``quick``: completes at once.
* ``nap``: ``ctx.sleep(payload seconds)``, then completes.
* ``approval``: returns ``ctx.wait_for("approved", timeout)``, or
  ``"timed out"`` on ``TimeoutError``.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

import sqlalchemy as sa
from marshmallow import Schema, fields
from support.processes import serve_worker

from venturi_sa import JobContext, Queue, Task, Worker, make_models

STEPS = ("charge", "ship", "email")


class OrderPayload(Schema):
    kill = fields.String(load_default="")


class Seconds(Schema):
    seconds = fields.Float(load_default=1.0)


def ddl(prefix: str) -> list[str]:
    return [f"CREATE TABLE IF NOT EXISTS {prefix}_effects (job_id text NOT NULL, step text NOT NULL, "
            "idempotency_key text NOT NULL, run_no int NOT NULL, pid int NOT NULL)"]


def build_queue(prefix: str, engine: sa.Engine, lease_seconds: float = 2.0) -> Queue:
    lease = timedelta(seconds=lease_seconds)

    def die_at(ctx: JobContext, point: str, kill: str) -> None:
        if ctx.run_count == 1 and kill == point:
            os.kill(os.getpid(), signal.SIGKILL)

    class Order(Task):
        KIND = "order"
        Payload = OrderPayload

        def run(self, ctx: JobContext) -> Any:
            kill = self.payload["kill"]
            for step in STEPS:
                def effect(step: str = step) -> str:
                    with engine.begin() as conn:
                        conn.execute(sa.text(f"INSERT INTO {prefix}_effects VALUES (:j, :s, :k, :r, :p)"), {
                            "j": ctx.job_id, "s": step, "k": ctx.step_key(step), "r": ctx.run_count,
                            "p": os.getpid()})
                    die_at(ctx, f"in:{step}", kill)
                    return f"{step} done"

                ctx.step(step, effect)
                die_at(ctx, f"after:{step}", kill)
            return "delivered"

    Order.lease = lease

    class Quick(Task):
        KIND = "quick"

        def run(self, ctx: JobContext) -> Any:
            return ctx.run_count

    class Nap(Task):
        KIND = "nap"
        Payload = Seconds

        def run(self, ctx: JobContext) -> Any:
            ctx.sleep(self.payload["seconds"])
            return ctx.run_count

    class Approval(Task):
        KIND = "approval"
        Payload = Seconds

        def run(self, ctx: JobContext) -> Any:
            try:
                return ctx.wait_for("approved", timeout=self.payload["seconds"])
            except TimeoutError:
                return "timed out"

    return Queue(make_models(prefix), [Order, Quick, Nap, Approval])


def main() -> int:
    prefix, concurrency = os.environ["VENTURI_PREFIX"], int(os.environ.get("VENTURI_CONCURRENCY", "1"))

    def build(env: Mapping[str, str], engine: sa.Engine) -> Worker:
        queue = build_queue(prefix, engine, float(env.get("VENTURI_LEASE", "2")))
        return Worker(queue, engine, concurrency=concurrency, poll_interval=0.2, grace=5, recover_interval=0.3)

    serve_worker(build, pool_size=concurrency + 4, max_overflow=10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
