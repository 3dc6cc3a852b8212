#!/usr/bin/env python
"""Async handlers against sync ones, at several worker concurrencies: the sizing numbers of docs/workers.md.

    bench/.venv/bin/python bench/async_sizing.py --rounds 4 --concurrency 10,50
    bench/.venv/bin/python bench/async_sizing.py --rounds 4 --concurrency 10,50 --sleep-ms 20 --n 1000

On one throwaway durable cluster (or ``--port``), each round runs every
variant once, in alternating order: enqueue ``--n`` jobs of one kind
(``VACUUM ANALYZE`` after), then drain them with
``Worker(...).run_until_idle()`` (``listen=False``) in a child process.
The variants are the handler (``sync``: ``def``; ``async``: ``async def``,
awaiting ``asyncio.sleep``) times the worker's engine (``psycopg2``; for
async handlers also an ``AsyncEngine`` on ``asyncpg`` and ``psycopg_async``)
times each ``--concurrency``.  With ``--sleep-ms`` each handler waits that
long (``time.sleep`` / ``await asyncio.sleep``: an I/O-bound handler);
without, it does nothing.  Prints each drain's jobs/s, then per variant the
median, and the median of the same-round ratios to ``sync/psycopg2`` at the
same concurrency (the only figure that means much on a shared machine).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
PREFIX = "sizing"


def _queue(sleep_ms: int) -> Any:
    import asyncio

    import venturi_sa

    queue = venturi_sa.Queue(venturi_sa.make_models(PREFIX))

    @queue.task("sync_job")
    def sync_job(payload: Any, ctx: Any) -> None:
        if sleep_ms:
            time.sleep(sleep_ms / 1000)

    @queue.task("async_job")
    async def async_job(payload: Any, ctx: Any) -> None:
        await asyncio.sleep(sleep_ms / 1000)

    return queue


def _child(dsn: str, kind: str, driver: str, concurrency: int, sleep_ms: int) -> None:
    import sqlalchemy as sa

    import venturi_sa

    queue = _queue(sleep_ms)
    url = sa.make_url(dsn)
    if driver == "psycopg2":
        engine: Any = sa.create_engine(url, pool_size=concurrency + 5, max_overflow=10)
    else:
        from sqlalchemy.ext.asyncio import create_async_engine

        engine = create_async_engine(url.set(drivername=f"postgresql+{driver}"), pool_size=concurrency + 5,
                                     max_overflow=10)
    worker = venturi_sa.Worker(queue, engine, concurrency=concurrency, listen=False, kinds=[kind])
    t0 = time.perf_counter()
    n = worker.run_until_idle()
    elapsed = time.perf_counter() - t0
    if isinstance(engine, sa.Engine):
        engine.dispose()
    print(json.dumps({"jobs": n, "seconds": elapsed}), flush=True)


def _enqueue(dsn: str, kind: str, n: int) -> None:
    import sqlalchemy as sa
    from sqlalchemy.orm import Session

    queue = _queue(0)
    task = queue.registry.get(kind)
    engine = sa.create_engine(dsn)
    for start in range(0, n, 1000):
        with Session(engine) as session:
            queue.enqueue_many(session, [task() for _ in range(start, min(n, start + 1000))])
            session.commit()
    engine.dispose()
    engine = sa.create_engine(dsn, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        for table in ("jobs", "journal"):
            conn.execute(sa.text(f"VACUUM ANALYZE {PREFIX}_{table}"))
    engine.dispose()


def _drain(dsn: str, kind: str, driver: str, concurrency: int, sleep_ms: int) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(BENCH_DIR.parent), "PYTHONDONTWRITEBYTECODE": "1"}
    res = subprocess.run([sys.executable, str(Path(__file__).resolve()), "_child", dsn, kind, driver,
                          str(concurrency), str(sleep_ms)], capture_output=True, text=True, env=env, check=True)
    return json.loads([ln for ln in res.stdout.splitlines() if ln.startswith("{")][-1])


def main(argv: list[str]) -> int:
    if argv[:1] == ["_child"]:
        _child(argv[1], argv[2], argv[3], int(argv[4]), int(argv[5]))
        return 0
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=2000)
    p.add_argument("--rounds", type=int, default=4, help="an even number: the order alternates")
    p.add_argument("--concurrency", default="10,50", help="comma-separated worker concurrencies")
    p.add_argument("--drivers", default="asyncpg,psycopg_async", help="AsyncEngine drivers for async handlers")
    p.add_argument("--sleep-ms", type=int, default=0, help="each handler waits this long (0: a no-op)")
    p.add_argument("--port", type=int, help="an existing superuser/trust server on 127.0.0.1")
    a = p.parse_args(argv)
    sys.path.insert(0, str(BENCH_DIR))
    from ab_kit import fresh_database, load, release

    cluster, dsn, admin = fresh_database(a.port, "async_sizing", PREFIX)
    engines = [("sync_job", "psycopg2"), ("async_job", "psycopg2")]
    engines += [("async_job", d) for d in a.drivers.split(",") if d]
    variants = [(kind, driver, int(c)) for c in a.concurrency.split(",") for kind, driver in engines]
    name = {v: f"{v[0].split('_')[0]}/{v[1]}/c{v[2]}" for v in variants}
    rates: dict[tuple[str, str, int], list[float]] = {v: [] for v in variants}
    print(f"{a.n} jobs per drain, handlers {'wait ' + str(a.sleep_ms) + ' ms' if a.sleep_ms else 'do nothing'}; "
          f"{load()}", flush=True)
    try:
        for r in range(a.rounds):
            for v in variants if r % 2 == 0 else variants[::-1]:
                _enqueue(dsn, v[0], a.n)
                out = _drain(dsn, *v, a.sleep_ms)
                rates[v].append(out["jobs"] / out["seconds"])
                print(f"round {r + 1} {name[v]}: {out['jobs']} jobs, {rates[v][-1]:,.0f} jobs/s; {load()}",
                      flush=True)
        for v in variants:
            base = ("sync_job", "psycopg2", v[2])
            ratios = [x / y for x, y in zip(rates[v], rates[base], strict=True)]
            print(f"{name[v]}: median {statistics.median(rates[v]):,.0f} jobs/s, "
                  f"{statistics.median(ratios):.2f}x {name[base]} (same-round ratios {min(ratios):.2f}-"
                  f"{max(ratios):.2f})")
        print(load(), flush=True)
    finally:
        release(cluster, admin)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
