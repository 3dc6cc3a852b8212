"""What limits cost: the claim of kinds without limits before/after, the limited claim by keys, limited drains.

One throwaway PostgreSQL (fsync off), queue prefix ``limitcost``.

1. **Unlimited A/B.** 20k pending jobs of a kind with no limit and no
   ``limit_key``.  "before" is the ordinary claim statement called directly
   (``storage.claim.claim``: what the worker ran before limits existed);
   "now" is the worker's claim (``storage.limited_claim.claim``: the
   overrides read, then the same statement).  Claims of 100, each rolled back,
   interleaved in a shuffled order with an A/A pair; medians and the median
   of the paired ratios.
2. **Limited claim cost.** The same claim of 100 for a kind with
   ``global_concurrency = 1000`` and ``limit_key`` spread over 1, 10, 100 and
   1000 keys (``key_concurrency = 50``), and with a rate limit.
3. **Limited drains.** 3000 jobs of a kind with ``global_concurrency = 8``
   and 30 keys, drained by 1, 2 and 4 worker processes (``run_until_idle``,
   concurrency 8 each): jobs per second.

``python bench/limitcost.py [--samples N]``
"""

from __future__ import annotations

import argparse
import multiprocessing
import random
import statistics
import sys
import time
from datetime import timedelta
from typing import Any

import sqlalchemy as sa
from marshmallow import Schema, fields
from sqlalchemy.orm import Session

import alembic_venturi
from venturi_sa import Queue, Rate, Task, Worker, make_models
from venturi_sa.storage import claim as plain
from venturi_sa.storage import limited_claim
from venturi_sa.storage.params import ClaimParams
from venturi_sa.task import declared_limits_of

PREFIX = "limitcost"


class Keyed(Schema):
    key = fields.String(load_default="")


class Free(Task):
    KIND = "free"
    Payload = Keyed

    def run(self, ctx: Any) -> None:
        pass


class Capped(Task):
    KIND = "capped"
    Payload = Keyed
    global_concurrency = 1000
    key_concurrency = 50

    def limit_key(self) -> str | None:
        return str(self.payload["key"])

    def run(self, ctx: Any) -> None:
        pass


class Rated(Task):
    KIND = "rated"
    Payload = Keyed
    rate_limit = Rate(1_000_000, timedelta(minutes=1))

    def run(self, ctx: Any) -> None:
        pass


class Drained(Task):
    KIND = "drained"
    Payload = Keyed
    global_concurrency = 8

    def limit_key(self) -> str | None:
        return str(self.payload["key"])

    def run(self, ctx: Any) -> None:
        pass


TASKS = [Free, Capped, Rated, Drained]


def _queue() -> Queue:
    return Queue(make_models(PREFIX), TASKS)


def _fill(engine: sa.Engine, task: type[Task], n: int, keys: int = 1) -> None:
    queue = _queue()
    with Session(engine) as session, session.begin():
        queue.enqueue_many(session, [task(key=f"k{i % keys}") for i in range(n)], ids_only=True)


def _clear(engine: sa.Engine, kind: str) -> None:
    with engine.begin() as conn:
        conn.execute(sa.text(f"DELETE FROM {PREFIX}_jobs WHERE kind = :k"), {"k": kind})


def _params(task: type[Task]) -> ClaimParams:
    return ClaimParams(worker_id="bench", kinds=[task.KIND], limit=100, leases={},
                       default_lease=timedelta(seconds=60), limits=declared_limits_of(TASKS))


def _timed(engine: sa.Engine, fn: Any) -> float:
    with engine.connect() as conn:
        conn.begin()
        started = time.perf_counter()
        jobs = fn(conn)
        elapsed = time.perf_counter() - started
        conn.rollback()
    assert len(jobs) == 100, len(jobs)
    return elapsed


def ab_unlimited(engine: sa.Engine, samples: int) -> None:
    models = make_models(PREFIX)
    _fill(engine, Free, 20_000)
    variants = {"before": lambda c: plain.claim(models, c, _params(Free)),
                "now": lambda c: limited_claim.claim(models, c, _params(Free))}
    variants["now again"] = variants["now"]
    times: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(samples):
        order = list(variants)
        random.shuffle(order)
        for name in order:
            times[name].append(_timed(engine, variants[name]))
    for name, values in times.items():
        print(f"unlimited claim of 100, {name}: median {statistics.median(values) * 1000:.3f} ms")
    ratio = statistics.median(n / b for n, b in zip(times["now"], times["before"], strict=True))
    noise = statistics.median(a / n for a, n in zip(times["now again"], times["now"], strict=True))
    print(f"unlimited claim ratio now/before: {ratio:.3f} (A/A noise {noise:.3f})")
    _clear(engine, "free")


def limited_cost(engine: sa.Engine, samples: int) -> None:
    models = make_models(PREFIX)
    for keys in (1, 10, 100, 1000):
        _fill(engine, Capped, 20_000, keys)
        with engine.begin() as conn:
            conn.execute(sa.text(f"ANALYZE {PREFIX}_jobs"))
        limit = 50 if keys == 1 else 100
        values = []
        for _ in range(max(10, samples // 4)):
            with engine.connect() as conn:
                conn.begin()
                started = time.perf_counter()
                jobs = limited_claim.claim(models, conn, _params(Capped))
                values.append(time.perf_counter() - started)
                conn.rollback()
            assert len(jobs) == limit, (keys, len(jobs))
        print(f"limited claim (global + key concurrency), 20k pending, {keys} keys: "
              f"median {statistics.median(values) * 1000:.3f} ms")
        _clear(engine, "capped")
    _fill(engine, Rated, 20_000)
    values = [_timed(engine, lambda c: limited_claim.claim(models, c, _params(Rated)))
              for _ in range(max(10, samples // 4))]
    print(f"rate-limited claim, 20k pending: median {statistics.median(values) * 1000:.3f} ms")
    _clear(engine, "rated")


def _drain(url: str) -> None:
    engine = sa.create_engine(url, pool_size=12)
    Worker(_queue(), engine, concurrency=8, kinds=["drained"], poll_interval=0.05).run_until_idle()
    engine.dispose()


def limited_drains(engine: sa.Engine, url: str) -> None:
    for processes in (1, 2, 4):
        _fill(engine, Drained, 3000, 30)
        started = time.perf_counter()
        procs = [multiprocessing.Process(target=_drain, args=(url,)) for _ in range(processes)]
        for p in procs:
            p.start()
        for p in procs:
            p.join()
        elapsed = time.perf_counter() - started
        with engine.connect() as conn:
            left = conn.execute(sa.text(f"SELECT count(*) FROM {PREFIX}_jobs WHERE kind = 'drained' "
                                        "AND status <> 'completed'")).scalar_one()
        print(f"limited drain (global_concurrency 8, 30 keys), {processes} process(es): "
              f"{3000 / elapsed:.0f} jobs/s ({left} left)")
        _clear(engine, "drained")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=200)
    args = parser.parse_args()
    from venturi_sa.devtools.throwaway import ThrowawayCluster

    with ThrowawayCluster({"fsync": "off"}) as cluster:
        url = cluster.url
        engine = sa.create_engine(url)
        alembic_venturi.upgrade(engine, PREFIX)
        ab_unlimited(engine, args.samples)
        limited_cost(engine, args.samples)
        limited_drains(engine, url)
        engine.dispose()
    return 0


if __name__ == "__main__":
    sys.exit(main())
