"""venturi's adapter for the adverse-conditions benchmark's poison case (registered by ``bench/run.py``).

5 % of the jobs (``seq % 20 == 0``) raise on their first two runs and are
retried at once (no backoff), succeeding on the third: the drain pays for
two failed runs, their retry writes and their journal/log rows per poison
job.  Same payloads and enqueue path as the plain adapter.  PgQueuer's
counterpart is in ``adverse_pgqueuer.py`` (imported only where PgQueuer is installed).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from peerbench import hooks
from venturi_adapter import PROFILES, NoopPayload, VenturiSaAdapter, _run_one, models

import venturi_sa

POISON_EVERY = 20
FAILED_RUNS = 2


class PoisonFailure(Exception):
    """What a poison job raises on its first runs."""


def _is_poison(seq: int) -> bool:
    return seq % POISON_EVERY == 0


poison_queue = venturi_sa.Queue(models)


@poison_queue.task("noop", payload=NoopPayload, backoff=lambda failures: timedelta(0))
def noop(payload: Any, ctx: venturi_sa.JobContext) -> None:
    hooks.job_started(payload["seq"])
    if _is_poison(payload["seq"]) and ctx.run_count <= FAILED_RUNS:
        raise PoisonFailure(f"poison job {payload['seq']}")


class VenturiPoisonAdapter(VenturiSaAdapter):
    name = "venturi_sa_poison"

    def run_worker(self, dsn: str, profile: str, ready: Callable[[], None], stop: threading.Event) -> None:
        options, _ = PROFILES[profile]
        _run_one(dsn, self.driver, options, stop, ready, poison_queue)
