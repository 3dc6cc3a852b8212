"""What a fan-out of ``--n`` jobs with one fan-in callback (``after=`` every one of them) costs.

Two variants on one throwaway cluster (or ``DSN``), each in a fresh queue
prefix: ``plain`` enqueues ``--n`` no-op jobs and drains them; ``fan-in``
enqueues the same jobs, then one callback with ``after=`` all of them (one
transaction: ``FOR SHARE`` on every parent and ``--n`` dependency rows),
and drains them all (every outcome batch decrements the callback's count
under its row lock; the last one releases it, which then runs and reads its
parents).  Printed per variant: the enqueue time of the jobs, the callback's
enqueue time, the drain time, and the drain's extra cost per parent
completion over ``plain``.  Usage: ``python bench/fan_in.py [DSN] [--n N]
[--workers W] [--rounds R]`` (defaults: a throwaway cluster, 10,000, 2
worker threads of concurrency 8 each, 3 rounds; medians).
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session

import alembic_venturi
from venturi_sa import JobContext, Queue, Task, Worker, make_models
from venturi_sa.devtools.throwaway import ThrowawayCluster

CHUNK = 1000


def _queue(prefix: str, seen: list[int]) -> Queue:
    class Leaf(Task):
        KIND = "leaf"

        def run(self, ctx: JobContext) -> Any:
            return None

    class Callback(Task):
        KIND = "callback"

        def run(self, ctx: JobContext) -> Any:
            seen.append(sum(1 for _ in ctx.iter_parents(batch=CHUNK)))

    return Queue(make_models(prefix), [Leaf, Callback])


def _drain(queue: Queue, engine: sa.Engine, workers: int) -> float:
    start = time.perf_counter()
    threads = [threading.Thread(target=Worker(queue, engine, concurrency=8, poll_interval=0.05).run_until_idle)
               for _ in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # a worker that went idle before the callback was released: drain what is left
    Worker(queue, engine, concurrency=1, poll_interval=0.05).run_until_idle()
    return time.perf_counter() - start


def one_round(engine: sa.Engine, n: int, workers: int, round_no: int) -> dict[str, float]:
    out: dict[str, float] = {}
    for variant in ("plain", "fan-in"):
        prefix = f"fanin{round_no}_{variant.replace('-', '')}"
        alembic_venturi.upgrade(engine, prefix)
        seen: list[int] = []
        queue = _queue(prefix, seen)
        leaf, callback = queue.registry.get("leaf"), queue.registry.get("callback")
        ids: list[str] = []
        start = time.perf_counter()
        for offset in range(0, n, CHUNK):
            with Session(engine) as s, s.begin():
                ids += queue.enqueue_many(s, [leaf() for _ in range(min(CHUNK, n - offset))], ids_only=True)
        out[f"{variant} enqueue s"] = time.perf_counter() - start
        if variant == "fan-in":
            start = time.perf_counter()
            with Session(engine) as s, s.begin():
                queue.enqueue(s, callback(), after=ids)
            out["callback enqueue s"] = time.perf_counter() - start
        out[f"{variant} drain s"] = _drain(queue, engine, workers)
        if variant == "fan-in":
            assert seen == [n], seen
        alembic_venturi.downgrade(engine, prefix, "base")
    out["extra drain µs per parent"] = (out["fan-in drain s"] - out["plain drain s"]) / n * 1e6
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dsn", nargs="?")
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    cluster = None if args.dsn else ThrowawayCluster().__enter__()
    engine = sa.create_engine(args.dsn or cluster.url, pool_size=40)  # type: ignore[union-attr]
    try:
        rounds = [one_round(engine, args.n, args.workers, r) for r in range(args.rounds)]
        for key in rounds[0]:
            values = [r[key] for r in rounds]
            print(f"{key:28s} median {statistics.median(values):10.3f}   ({', '.join(f'{v:.3f}' for v in values)})")
    finally:
        engine.dispose()
        if cluster is not None:
            cluster.__exit__(None, None, None)


if __name__ == "__main__":
    main()
