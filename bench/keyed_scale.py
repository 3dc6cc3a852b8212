"""How a keyed (per-key limited, fair) kind drains as its backlog grows, against a kind without limits.

One throwaway PostgreSQL (fsync off), queue prefix ``keyedscale``.  For each
backlog (10k, 50k, 200k pending by default) and each scenario, the jobs
tables are emptied, filled with ``enqueue_many`` and vacuumed and analyzed;
one worker process (concurrency 8, only that kind) then drains for a warm-up
second and a measured window (8 s by default, ended early once half the backlog
has completed in it), and the rate is the completed rows counted in the database
at the window's two ends.  Scenarios:

* ``plain``: a no-op kind with no limits and no ``limit_key``;
* ``keyed100``: the same no-op with ``key_concurrency = 4`` and ``limit_key``
  over 100 keys, jobs enqueued round-robin over the keys;
* ``keyed10k``: the same over 10,000 keys;
* ``dominant``: the same, 90 % of the jobs on one key, the rest over 99 keys.

Before each drain the claim of 8 itself is timed (median of 5, each in a
rolled-back transaction).  Each round runs the scenarios of a backlog in a
shuffled order; the report gives per cell the median of the rounds, and per
keyed cell its ratio to ``plain`` at the same backlog and to itself at the
smallest backlog.

``python bench/keyed_scale.py [--rounds 3] [--window 8] [--sizes 10000,50000,200000]
[--scenarios plain,keyed100,keyed10k,dominant]``
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import random
import signal
import statistics
import sys
import time
from datetime import timedelta
from typing import Any

import sqlalchemy as sa
from marshmallow import Schema, fields
from sqlalchemy.orm import Session

import alembic_venturi
from venturi_sa import Queue, Task, Worker, make_models
from venturi_sa.storage import limited_claim
from venturi_sa.storage.params import ClaimParams
from venturi_sa.task import declared_limits_of

PREFIX = "keyedscale"
SCENARIOS = ("plain", "keyed100", "keyed10k", "dominant")
CHUNK = 20_000


class Keyed(Schema):
    key = fields.String(load_default="")


class Plain(Task):
    KIND = "plain"
    Payload = Keyed

    def run(self, ctx: Any) -> None:
        pass


class PerKey(Task):
    KIND = "keyed"
    Payload = Keyed
    key_concurrency = 4

    def limit_key(self) -> str | None:
        return str(self.payload["key"])

    def run(self, ctx: Any) -> None:
        pass


TASKS = [Plain, PerKey]


def _queue() -> Queue:
    return Queue(make_models(PREFIX), TASKS)


def _key(scenario: str, i: int) -> str:
    if scenario == "keyed10k":
        return f"k{i % 10_000}"
    if scenario == "dominant":
        return "hot" if i % 10 else f"k{(i // 10) % 99}"
    return f"k{i % 100}"


def _task(scenario: str) -> type[Task]:
    return Plain if scenario == "plain" else PerKey


def _fresh(engine: sa.Engine, scenario: str, n: int) -> None:
    """Empty every table the claim reads, enqueue ``n`` jobs of the scenario, vacuum and analyze."""
    with engine.begin() as conn:
        conn.execute(sa.text(f"TRUNCATE {PREFIX}_jobs, {PREFIX}_limit_turns, {PREFIX}_limit_starts CASCADE"))
    queue, task = _queue(), _task(scenario)
    for first in range(0, n, CHUNK):
        with Session(engine) as session, session.begin():
            queue.enqueue_many(session, [task(key=_key(scenario, i)) for i in range(first, min(n, first + CHUNK))],
                               ids_only=True)
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(sa.text(f"VACUUM ANALYZE {PREFIX}_jobs"))
        conn.execute(sa.text(f"VACUUM ANALYZE {PREFIX}_limit_keys"))


def _claim_ms(engine: sa.Engine, scenario: str) -> float:
    """The median time of one claim of 8 of the scenario's kind (5 claims, each rolled back)."""
    models = make_models(PREFIX)
    params = ClaimParams(worker_id="bench", kinds=[_task(scenario).KIND], limit=8, leases={},
                         default_lease=timedelta(seconds=60), limits=declared_limits_of(TASKS))
    values = []
    for _ in range(5):
        with engine.connect() as conn:
            conn.begin()
            started = time.perf_counter()
            jobs = limited_claim.claim(models, conn, params)
            values.append(time.perf_counter() - started)
            conn.rollback()
        assert len(jobs) == 8, (scenario, len(jobs))
    return statistics.median(values) * 1000


def _work(url: str, kind: str) -> None:
    engine = sa.create_engine(url, pool_size=12)
    Worker(_queue(), engine, concurrency=8, kinds=[kind], poll_interval=0.05).run()
    engine.dispose()


def _completed(engine: sa.Engine, kind: str) -> int:
    with engine.connect() as conn:
        return int(conn.execute(sa.text(f"SELECT count(*) FROM {PREFIX}_jobs WHERE kind = :k "
                                         "AND status = 'completed'"), {"k": kind}).scalar_one())


def _drain_rate(engine: sa.Engine, url: str, scenario: str, window: float, backlog: int) -> float:
    """Jobs per second one worker (concurrency 8) completes over ``window`` seconds, after a warm-up.

    The window ends early once half of ``backlog`` has completed in it, so a fast
    drain is never measured with the backlog gone.
    """
    kind = _task(scenario).KIND
    proc = multiprocessing.Process(target=_work, args=(url, kind))
    proc.start()
    try:
        deadline = time.monotonic() + 60
        while _completed(engine, kind) == 0 and time.monotonic() < deadline:  # started and claiming
            time.sleep(0.05)
        time.sleep(1.0)
        first, began = _completed(engine, kind), time.monotonic()
        last, ended = first, began
        while ended - began < window and last - first < backlog // 2:  # never count time with nothing left
            time.sleep(0.1)
            last, ended = _completed(engine, kind), time.monotonic()
    finally:
        if proc.pid is not None:
            os.kill(proc.pid, signal.SIGTERM)
        proc.join(30)
        if proc.is_alive():
            proc.kill()
            proc.join()
    return (last - first) / (ended - began)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--window", type=float, default=8.0)
    parser.add_argument("--sizes", default="10000,50000,200000")
    parser.add_argument("--scenarios", default=",".join(SCENARIOS))
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    scenarios = [s for s in args.scenarios.split(",") if s]
    unknown = set(scenarios) - set(SCENARIOS)
    if unknown:
        parser.error(f"unknown scenarios: {sorted(unknown)}")
    from venturi_sa.devtools.throwaway import ThrowawayCluster

    rates: dict[tuple[str, int], list[float]] = {}
    claims: dict[tuple[str, int], list[float]] = {}
    with ThrowawayCluster({"fsync": "off"}) as cluster:
        url = cluster.url
        engine = sa.create_engine(url)
        alembic_venturi.upgrade(engine, PREFIX)
        for round_no in range(args.rounds):
            for n in sizes:
                order = list(scenarios)
                random.shuffle(order)
                for scenario in order:
                    _fresh(engine, scenario, n)
                    ms = _claim_ms(engine, scenario)
                    rate = _drain_rate(engine, url, scenario, args.window, n)
                    claims.setdefault((scenario, n), []).append(ms)
                    rates.setdefault((scenario, n), []).append(rate)
                    print(f"round {round_no + 1} {n:>7} pending {scenario:>9}: {rate:8.1f} jobs/s, "
                          f"claim of 8 {ms:8.2f} ms", flush=True)
        engine.dispose()
    print()
    print("| pending | scenario | jobs/s (median) | claim of 8, ms | ÷ plain | ÷ own at smallest |")
    print("|---:|---|---:|---:|---:|---:|")
    for n in sizes:
        for scenario in scenarios:
            rate = statistics.median(rates[(scenario, n)])
            plain = statistics.median(rates[("plain", n)]) if ("plain", n) in rates else None
            base = statistics.median(rates[(scenario, sizes[0])])
            vs_plain = f"{rate / plain:.3f}" if plain and scenario != "plain" else ""
            vs_own = f"{rate / base:.3f}" if base else ""
            print(f"| {n:,} | {scenario} | {rate:.0f} | {statistics.median(claims[(scenario, n)]):.2f} | "
                  f"{vs_plain} | {vs_own} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
