"""What the test clock costs the claim: production, the engaged test clock, and the rejected inline shape.

venturi's test clock (``venturi_sa.storage.clock``) shadows ``now()`` and
friends through the transaction-local ``search_path``, so production
statements are unchanged.  This measures, in one run, interleaved round by
round so drift hits all variants alike:

* ``production``: the claim statement venturi sends (compiled once);
* ``production-again``: the same, a second time (the noise floor);
* ``test-clock``: the same text inside a transaction whose clock is engaged (what a test pays);
* ``inline-setting``: the shape the clock avoids, ``now()`` replaced in the
  statement text by ``coalesce(nullif(current_setting('venturi.now', true), '')::timestamptz, now())``.

Each sample claims ``limit`` jobs and rolls back, so every sample sees the
same table: ``eligible`` pending jobs due now, ``scheduled`` pending jobs
due tomorrow (so ``visible_at <= now()`` filters), ``completed`` history.
Usage: ``python bench/clockcost.py [DSN]`` (default: a throwaway cluster).
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import sqlalchemy as sa

import alembic_venturi
from venturi_sa import make_models
from venturi_sa.devtools.throwaway import ThrowawayCluster
from venturi_sa.storage import claim as claims
from venturi_sa.storage import clock as dbclock
from venturi_sa.storage.params import ClaimParams

PREFIX = "clockbench"
SEED = f"""
INSERT INTO {PREFIX}_jobs (id, kind, payload, priority, status, created_at, visible_at, finished_at, run_count)
SELECT lpad(g::text, 26, '0'), 'noop', '{{}}', 1, %(status)s, now() - interval '1 hour',
       now() + %(due)s::interval, CASE WHEN %(status)s = 'completed' THEN now() END, 0
  FROM generate_series(%(first)s, %(last)s) AS g
"""
INLINE = "coalesce(nullif(current_setting('venturi.now', true), '')::timestamptz, now())"


def seed(engine: sa.Engine, eligible: int, scheduled: int, completed: int) -> None:
    alembic_venturi.upgrade(engine, PREFIX)
    with engine.begin() as conn:
        conn.exec_driver_sql(f"TRUNCATE {PREFIX}_jobs CASCADE")
        first = 0
        for status, due, n in (("pending", "-1 minute", eligible), ("pending", "1 day", scheduled),
                               ("completed", "-1 hour", completed)):
            conn.exec_driver_sql(SEED, {"status": status, "due": due, "first": first, "last": first + n - 1})
            first += n
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.exec_driver_sql(f"VACUUM ANALYZE {PREFIX}_jobs")


def claim_sql(engine: sa.Engine, limit: int) -> tuple[str, Any]:
    """The exact SQL text and parameters venturi's claim sends (captured from one real claim)."""
    params = ClaimParams(worker_id="clockcost", kinds=["noop"], limit=limit, leases={},
                         default_lease=timedelta(seconds=60))
    seen: list[tuple[str, Any]] = []

    def capture(conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, many: bool) -> None:
        seen.append((statement, parameters))

    with engine.connect() as conn:
        sa.event.listen(conn, "before_cursor_execute", capture)
        conn.begin()
        claims.claim(make_models(PREFIX), conn, params)
        conn.rollback()
    return seen[-1]


def sample(engine: sa.Engine, sql: str, binds: Any, limit: int,
           before: Callable[[sa.Connection], None] | None = None) -> float:
    with engine.connect() as conn:
        conn.begin()
        if before is not None:
            before(conn)
        started = time.perf_counter()
        rows = conn.exec_driver_sql(sql, binds).all()
        elapsed = time.perf_counter() - started
        conn.rollback()
    assert len(rows) == limit, (len(rows), limit)
    return elapsed


def main(dsn: str, rounds: int = 7, samples: int = 60) -> None:
    engine = sa.create_engine(dsn, pool_size=2)
    seed(engine, eligible=2_000, scheduled=50_000, completed=200_000)
    for limit in (1, 100):
        sql, binds = claim_sql(engine, limit)
        assert "visible_at <= now()" in sql
        variants: dict[str, tuple[str, Callable[[sa.Connection], None] | None]] = {
            "production": (sql, None),
            "production-again": (sql, None),
            "test-clock": (sql, dbclock.engage),
            "inline-setting": (sql.replace("now()", INLINE), None),
        }
        medians: dict[str, list[float]] = {name: [] for name in variants}
        for _ in range(rounds):
            for name, (text, before) in variants.items():
                for _ in range(5):  # warm the plan and the cache for this variant
                    sample(engine, text, binds, limit, before)
                times = [sample(engine, text, binds, limit, before) for _ in range(samples)]
                medians[name].append(statistics.median(times) * 1000)
        print(f"claim of {limit}: median of {rounds} round medians ({samples} samples each), ms")
        base = statistics.median(medians["production"])
        for name, values in medians.items():
            mid = statistics.median(values)
            print(f"  {name:17s} {mid:7.3f}  ({mid / base - 1:+6.1%})  rounds: "
                  + " ".join(f"{v:.3f}" for v in values))
    engine.dispose()


if __name__ == "__main__":
    if len(sys.argv) > 1:
        main(sys.argv[1])
    else:
        with ThrowawayCluster() as cluster:
            main(cluster.url)
