#!/usr/bin/env python
"""What one of the worker's own transactions costs per driver: the Connections runner, timed.

    bench/.venv/bin/python bench/runner_cost.py                 # 1,000 transactions x 5 rounds
    bench/.venv/bin/python bench/runner_cost.py --n 2000 --port 5432

Each transaction is ``SELECT 1 + :x`` through the runner a worker uses for its
claims, outcome batches and renewals (``venturi_sa.worker.connections``):
``SyncConnections`` on psycopg2 and psycopg 3, ``AsyncConnections`` on
asyncpg and psycopg 3 async, called from a thread as the worker's threads
call it (the transaction runs on the worker loop while the thread waits).
The async runners are also timed on the loop itself (the same transactions
awaited one after the other in one coroutine, no thread hand-off), so the
difference is the cost of the hand-off.  Prints the median wall time and
process CPU (``getrusage``, all threads) per transaction, and the ratio to
psycopg2 in the same run.  A throwaway cluster with ``fsync=off`` (or
``--port``) isolates client-side cost from the disk.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import sqlalchemy as sa


def _timed(run: Callable[[], None], n: int) -> tuple[float, float]:
    """Wall and CPU microseconds per call of ``run`` (which makes ``n`` transactions)."""
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.perf_counter()
    run()
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    cpu = r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime
    return 1e6 * wall / n, 1e6 * cpu / n


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=1000, help="transactions per variant and round")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--port", type=int, help="an existing superuser/trust server on 127.0.0.1")
    a = p.parse_args(argv)
    from sqlalchemy.ext.asyncio import create_async_engine

    from venturi_sa.devtools.throwaway import ThrowawayCluster
    from venturi_sa.worker.connections import AsyncConnections, SyncConnections
    from venturi_sa.worker.loop import worker_loop

    cluster = None if a.port else ThrowawayCluster({"fsync": "off", "synchronous_commit": "off"}).start()
    base = f"postgres@127.0.0.1:{a.port or cluster.port}/postgres"  # type: ignore[union-attr]
    loop = worker_loop()

    async def async_engine(driver: str) -> Any:  # made on the loop its connections belong to
        return create_async_engine(f"postgresql+{driver}://{base}")

    runners: dict[str, Any] = {d: SyncConnections(sa.create_engine(f"postgresql+{d}://{base}"))
                               for d in ("psycopg2", "psycopg")}
    runners.update({d: AsyncConnections(loop.run(async_engine(d))) for d in ("asyncpg", "psycopg_async")})
    stmt = sa.select(sa.literal(1, sa.Integer) + sa.bindparam("x", type_=sa.Integer))

    def fn(conn: sa.Connection) -> Any:
        return conn.execute(stmt, {"x": 1}).scalar()

    def from_thread(runner: Any) -> Callable[[], None]:
        def burst() -> None:
            for _ in range(a.n):
                runner.begin(fn)

        return burst

    def on_loop(runner: AsyncConnections) -> Callable[[], None]:
        from sqlalchemy.util import greenlet_spawn

        async def burst() -> None:
            for _ in range(a.n):
                await greenlet_spawn(runner._sync.begin, fn)

        return lambda: loop.run(burst())

    variants = {name: from_thread(r) for name, r in runners.items()}
    variants.update({f"{name} (on the loop)": on_loop(r) for name, r in runners.items()
                     if isinstance(r, AsyncConnections)})
    walls: dict[str, list[float]] = {v: [] for v in variants}
    cpus: dict[str, list[float]] = {v: [] for v in variants}
    try:
        for runner in runners.values():  # warm the pools and the caches
            for _ in range(100):
                runner.begin(fn)
        for _ in range(a.rounds):
            for name, run in variants.items():
                wall, cpu = _timed(run, a.n)
                walls[name].append(wall)
                cpus[name].append(cpu)
        base_wall = statistics.median(walls["psycopg2"])
        for name in variants:
            wall = statistics.median(walls[name])
            print(f"{name:28s} {wall:7.0f} µs/transaction ({wall / base_wall:.2f}× psycopg2), "
                  f"CPU {statistics.median(cpus[name]):6.0f} µs")
    finally:
        for runner in runners.values():
            if isinstance(runner, AsyncConnections):
                loop.run(runner.engine.dispose())
            else:
                runner.engine.dispose()
        if cluster is not None:
            cluster.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
