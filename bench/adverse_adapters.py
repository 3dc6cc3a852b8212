"""Adapters for the adverse-conditions benchmark's poison case (registered by ``bench/run.py``).

5 % of the jobs (``seq % 20 == 0``) raise on their first two runs and are
retried at once (no backoff), succeeding on the third: the drain pays for
two failed runs, their retry writes and their journal/log rows per poison
job.  Same payloads and enqueue path as the plain adapters.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import asyncpg
from peerbench import hooks
from peerbench.adapters.pgqueuer_adapter import PgQueuerAdapter
from peerbench.util import wait_thread_event
from pgqueuer import AsyncpgDriver, Job, Queries, QueueManager
from pgqueuer.executors import DatabaseRetryEntrypointExecutor
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
        _run_one(dsn, options, stop, ready, poison_queue)


class PgQueuerPoisonAdapter(PgQueuerAdapter):
    name = "pgqueuer_poison"

    def run_worker(self, dsn, profile, ready, stop) -> None:  # type: ignore[no-untyped-def]
        kwargs = self._profile_kwargs[profile]

        async def go() -> None:
            conn = await asyncpg.connect(dsn)
            qm = QueueManager(Queries(AsyncpgDriver(conn)))

            @qm.entrypoint("noop", executor_factory=lambda params: DatabaseRetryEntrypointExecutor(
                params, max_attempts=FAILED_RUNS + 3, initial_delay=timedelta(0)))
            async def noop(job: Job) -> None:
                seq = int(job.payload)
                hooks.job_started(seq)
                if _is_poison(seq) and job.attempts < FAILED_RUNS:
                    raise PoisonFailure(f"poison job {seq}")

            ready()
            run = asyncio.create_task(qm.run(**kwargs))
            await wait_thread_event(stop)
            qm.shutdown.set()
            await asyncio.wait_for(run, 30)
            await conn.close()

        asyncio.run(go())
