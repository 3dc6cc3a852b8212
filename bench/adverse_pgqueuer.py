"""PgQueuer's adapter for the adverse-conditions benchmark's poison case (see ``adverse_adapters.py``).

Poison jobs raise on their first runs; ``DatabaseRetryEntrypointExecutor``
(no delay) re-queues them, as venturi's zero backoff does.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

import asyncpg
from adverse_adapters import FAILED_RUNS, PoisonFailure, _is_poison
from peerbench import hooks
from peerbench.adapters.pgqueuer_adapter import PgQueuerAdapter
from peerbench.util import wait_thread_event
from pgqueuer import AsyncpgDriver, Job, Queries, QueueManager
from pgqueuer.executors import DatabaseRetryEntrypointExecutor


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
