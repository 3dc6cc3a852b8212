"""An application for ``venturi worker cli_app:queue`` in the hardening tests (run from this folder).

Settings from the environment: ``HARD_PREFIX`` (the queue), ``HARD_DSN``
(for the handlers' own bookkeeping connection) and ``HARD_GATE`` (a file
path).  The one kind ``hold`` records ``<prefix>_marks`` rows in its own
committed transactions (``started``, then ``returning`` just before it
returns) and, by its payload's ``mode``: ``block`` sleeps until the process
is gone; ``gate`` waits for the file ``HARD_GATE`` to exist.
"""

from __future__ import annotations

import os
import threading
from datetime import timedelta
from pathlib import Path

import sqlalchemy as sa
from marshmallow import Schema, fields

from venturi_sa import Complete, JobContext, Queue, Task, make_models

PREFIX = os.environ.get("HARD_PREFIX", "hard_cli_app")
_engine: sa.Engine | None = None


def marks_ddl(prefix: str) -> str:
    return f"CREATE TABLE IF NOT EXISTS {prefix}_marks (job_id text NOT NULL, mark text NOT NULL)"


def _mark(job_id: str, mark: str) -> None:
    global _engine
    if _engine is None:
        _engine = sa.create_engine(os.environ["HARD_DSN"], poolclass=sa.pool.NullPool)
    with _engine.begin() as conn:
        conn.execute(sa.text(f"INSERT INTO {PREFIX}_marks VALUES (:j, :m)"), {"j": job_id, "m": mark})


class HoldPayload(Schema):
    mode = fields.String(required=True)


class Hold(Task):
    KIND = "hold"
    Payload = HoldPayload

    def run(self, ctx: JobContext) -> Complete:
        _mark(ctx.job_id, "started")
        if self.payload["mode"] == "block":
            threading.Event().wait(120)  # until the process exits
        else:
            gate = Path(os.environ["HARD_GATE"])
            while not gate.exists():
                threading.Event().wait(0.02)
        _mark(ctx.job_id, "returning")
        return Complete(f"{self.payload['mode']} done")


class ShortPayload(Schema):
    ms = fields.Integer(required=True)


class Short(Task):
    """A short job with a 1 s lease (the deadlock stress test); its outcome is batched."""

    KIND = "short"
    Payload = ShortPayload
    lease = timedelta(seconds=1)

    def run(self, ctx: JobContext) -> None:
        threading.Event().wait(self.payload["ms"] / 1000)  # the work


queue = Queue(make_models(PREFIX), [Hold, Short])
