"""A worker application with one throttled kind, for the throttle acceptance test, run as a real process.

``python throttle_app.py`` reads ``VENTURI_DSN`` and ``VENTURI_PREFIX``
(``support.processes``).  The kind ``burst`` is throttled to one start per
:data:`WINDOW` per ``key``, and every enqueue is its own row (``merge``
returns ``Independent``), so several jobs of one key are eligible at once.
Each run first commits a ``<prefix>_starts`` row in its own transaction
(so a failing run keeps it): its job, run number, pid, key and the time of
its claim (the lease's end minus the lease, on the database clock).  A
payload with ``fail_first`` fails its first run, with no backoff.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from datetime import timedelta

import sqlalchemy as sa
from marshmallow import Schema, fields
from support.processes import serve_worker

from venturi_sa import Independent, JobContext, Queue, Task, Worker, make_models
from venturi_sa.models import JobBase

WINDOW = timedelta(seconds=1)
LEASE = timedelta(seconds=60)


class Burst(Schema):
    key = fields.String(required=True)
    n = fields.Integer(load_default=0)
    fail_first = fields.Boolean(load_default=False)


def ddl(prefix: str) -> list[str]:
    return [f"CREATE TABLE IF NOT EXISTS {prefix}_starts (job_id text NOT NULL, run_no int NOT NULL, "
            "pid int NOT NULL, key text NOT NULL, claimed_at timestamptz NOT NULL)"]


def build_queue(prefix: str, engine: sa.Engine) -> Queue:
    """The app's queue; the test imports it to enqueue ``burst`` jobs."""

    class BurstTask(Task):
        KIND = "burst"
        Payload = Burst
        throttle = WINDOW
        lease = LEASE

        def dedup_key(self) -> str:
            return str(self.payload["key"])

        def merge(self, existing: JobBase) -> Independent:
            return Independent()

        @classmethod
        def backoff(cls, failure_count: int) -> timedelta:
            return timedelta(0)  # a retry is due at once: only the throttle holds it back

        def run(self, ctx: JobContext) -> None:
            with engine.begin() as conn:
                conn.execute(sa.text(
                    f"INSERT INTO {prefix}_starts SELECT :j, :r, :p, :k, claim_expires_at - :lease "
                    f"FROM {prefix}_jobs WHERE id = :j"),
                    {"j": ctx.job_id, "r": ctx.run_count, "p": os.getpid(), "k": self.payload["key"], "lease": LEASE})
            if self.payload["fail_first"] and ctx.run_count == 1:
                raise RuntimeError("first run fails")

    return Queue(make_models(prefix), [BurstTask])


def main() -> int:
    prefix = os.environ["VENTURI_PREFIX"]

    def build(env: Mapping[str, str], engine: sa.Engine) -> Worker:
        return Worker(build_queue(prefix, engine), engine, concurrency=4, poll_interval=0.5)

    serve_worker(build, pool_size=8)
    return 0


if __name__ == "__main__":
    sys.exit(main())
