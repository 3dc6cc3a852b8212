"""What ``ctx.checkpoint()`` costs a running handler: one fenced ``UPDATE ... RETURNING`` and its commit.

One job runs in a real worker; its handler times ``count`` checkpoints of a
small carry (``{"next_row": n}``), then ``count`` ``ctx.progress()`` calls,
then, as floors, ``count`` bare round trips (``SELECT 1`` in its own
transaction) and ``count`` one-row ``UPDATE`` statements with their commit on the
same engine (the commit's WAL flush is most of a checkpoint's cost).  Printed: median and p95 per call, in
milliseconds.  Usage: ``python bench/checkpoint.py [DSN] [--count N]``
(default: a throwaway cluster, 500).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

import sqlalchemy as sa
from marshmallow import Schema, fields
from sqlalchemy.orm import Session

import alembic_venturi
from venturi_sa import JobContext, Queue, Task, Worker, make_models
from venturi_sa.devtools.throwaway import ThrowawayCluster

PREFIX = "checkpointbench"


def timed(fn: Callable[[int], Any], count: int) -> list[float]:
    samples = []
    for n in range(count):
        start = time.perf_counter()
        fn(n)
        samples.append((time.perf_counter() - start) * 1000)
    return samples


def measure(engine: sa.Engine, count: int) -> dict[str, list[float]]:
    results: dict[str, list[float]] = {}

    class Bench(Task):
        KIND = "bench"

        class Carry(Schema):
            next_row = fields.Integer()
            progress = fields.Dict()

        def run(self, ctx: JobContext) -> Any:
            results["checkpoint"] = timed(lambda n: ctx.checkpoint({"next_row": n}), count)
            results["progress"] = timed(lambda n: ctx.progress(n, count, "rows"), count)

            def round_trip(n: int) -> None:
                with engine.begin() as conn:
                    conn.execute(sa.select(1))

            def write(n: int) -> None:
                with engine.begin() as conn:
                    conn.execute(sa.text(f"UPDATE {PREFIX}_floor SET n = :n"), {"n": n})

            results["round trip (floor)"] = timed(round_trip, count)
            results["UPDATE+commit"] = timed(write, count)

    alembic_venturi.upgrade(engine, PREFIX)
    with engine.begin() as conn:
        conn.execute(sa.text(f"DROP TABLE IF EXISTS {PREFIX}_floor"))
        conn.execute(sa.text(f"CREATE TABLE {PREFIX}_floor AS SELECT 0 AS n"))
    queue = Queue(make_models(PREFIX), [Bench])
    with Session(engine) as session, session.begin():
        queue.enqueue(session, Bench())
    Worker(queue, engine, concurrency=1, listen=False).run_until_idle()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dsn", nargs="?")
    parser.add_argument("--count", type=int, default=500)
    args = parser.parse_args()
    cluster = None if args.dsn else ThrowawayCluster().__enter__()
    engine = sa.create_engine(args.dsn or cluster.url)  # type: ignore[union-attr]
    try:
        for name, samples in measure(engine, args.count).items():
            p95 = statistics.quantiles(samples, n=20)[-1]
            print(f"{name:20s} median {statistics.median(samples):6.3f} ms   p95 {p95:6.3f} ms   (n={len(samples)})")
    finally:
        engine.dispose()
        if cluster is not None:
            cluster.__exit__(None, None, None)


if __name__ == "__main__":
    main()
