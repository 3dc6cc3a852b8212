"""Claim cost as terminal rows grow: venturi's claim with 10k -> 100k -> 1M completed rows.

One database, one queue (prefix ``bench``).  ``pending`` jobs are enqueued
once through ``Queue.enqueue_many``; completed rows are then added in steps
with ``INSERT ... SELECT generate_series`` (they look like finished jobs:
status ``completed``, ``finished_at`` set).  At each size, after ``VACUUM
ANALYZE`` and ``CHECKPOINT``, the worker's own claim (``storage.claim``) of
1 and of 100 jobs runs ``samples`` times; each claim is timed from execute
to fetched rows and then rolled back, so every sample sees the same table.
``EXPLAIN (ANALYZE, BUFFERS)`` of the 100-job claim is kept per size.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import psycopg2
import sqlalchemy as sa
from sqlalchemy.orm import Session
from venturi_adapter import PREFIX, engine_for, models, noop, queue

import alembic_venturi
from venturi_sa.storage import claim as claims
from venturi_sa.storage.params import ClaimParams

SEED_COMPLETED = f"""
INSERT INTO {PREFIX}_jobs (id, kind, payload, priority, status, created_at, visible_at,
                           finished_at, run_count)
SELECT 'done' || lpad(g::text, 22, '0'), 'noop', jsonb_build_object('seq', g), 1, 'completed',
       now() - interval '2 hours' + g * interval '1 millisecond',
       now() - interval '2 hours' + g * interval '1 millisecond',
       now() - interval '1 hour', 1
  FROM generate_series(%(first)s, %(last)s) AS g
"""


def _params(limit: int) -> ClaimParams:
    return ClaimParams(worker_id="claimcost", kinds=[noop.KIND], limit=limit,
                       leases={noop.KIND: noop.lease}, default_lease=timedelta(seconds=60))


def _admin(dsn: str, *sqls: str, params: dict[str, Any] | None = None) -> None:
    conn = psycopg2.connect(dsn)
    conn.autocommit = True
    try:
        with conn.cursor() as cur:
            for sql in sqls:
                cur.execute(sql, params)
    finally:
        conn.close()


def _explain(engine: sa.Engine, limit: int) -> str:
    """EXPLAIN (ANALYZE, BUFFERS) of the exact SQL and parameters venturi's claim sends."""
    seen: list[tuple[str, Any]] = []

    def capture(conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, many: bool) -> None:
        if "FOR UPDATE SKIP LOCKED" in statement and not seen:
            seen.append((statement, parameters))

    sa.event.listen(engine, "before_cursor_execute", capture)
    try:
        with Session(engine) as session:
            claims.claim(models, session, _params(limit))
            session.rollback()
    finally:
        sa.event.remove(engine, "before_cursor_execute", capture)
    statement, parameters = seen[0]
    raw = engine.raw_connection()
    try:
        cur = raw.cursor()
        cur.execute("EXPLAIN (ANALYZE, BUFFERS) " + statement, parameters)
        plan = "\n".join(row[0] for row in cur.fetchall())
        raw.rollback()
        return plan
    finally:
        raw.close()


def _time_claims(engine: sa.Engine, limit: int, samples: int) -> list[float]:
    params = _params(limit)
    times: list[float] = []
    with Session(engine) as session:
        for i in range(samples + 3):  # 3 warm-up claims
            t0 = time.perf_counter()
            jobs = claims.claim(models, session, params)
            elapsed = time.perf_counter() - t0
            session.rollback()
            if len(jobs) != limit:
                raise RuntimeError(f"claim of {limit} returned {len(jobs)} jobs")
            if i >= 3:
                times.append(elapsed * 1000)
    return times


def run(admin_dsn: str, db_dsn: str, sizes: list[int], pending: int, samples: int,
        record: Callable[..., None], log: Callable[[str], None]) -> list[dict[str, Any]]:
    """Measure claim cost at each size in ``sizes`` (cumulative completed rows)."""
    dbname = db_dsn.rsplit("/", 1)[1]
    _admin(admin_dsn, f'DROP DATABASE IF EXISTS "{dbname}" WITH (FORCE)', f'CREATE DATABASE "{dbname}"')
    engine = engine_for(db_dsn)
    rows: list[dict[str, Any]] = []
    try:
        alembic_venturi.upgrade(engine, PREFIX)
        with Session(engine) as session:
            for start in range(0, pending, 1000):
                queue.enqueue_many(session, [noop(seq=s) for s in range(start, min(pending, start + 1000))])
            session.commit()
        have = 0
        for size in sorted(sizes):
            t0 = time.monotonic()
            _admin(db_dsn, SEED_COMPLETED, params={"first": have + 1, "last": size})
            have = size
            _admin(db_dsn, f"VACUUM ANALYZE {PREFIX}_jobs", "CHECKPOINT")
            log(f"claim_cost: {size:,} completed + {pending:,} pending rows (seeded in {time.monotonic() - t0:.1f} s)")
            plan = _explain(engine, 100)
            for limit in (1, 100):
                times = _time_claims(engine, limit, samples)
                row = dict(phase="claim_cost", system="venturi_sa", profile=f"claim{limit}",
                           terminal_rows=size, pending_rows=pending, limit=limit,
                           value=statistics.median(times), unit="ms",
                           p90=sorted(times)[int(0.9 * (len(times) - 1))], min=min(times),
                           samples=len(times), plan=plan if limit == 100 else None)
                record(**row)
                rows.append(row)
    finally:
        engine.dispose()
        _admin(admin_dsn, f'DROP DATABASE IF EXISTS "{dbname}" WITH (FORCE)')
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    """Markdown: median claim time per size, and the ratio to the smallest size."""
    sizes = sorted({r["terminal_rows"] for r in rows})
    lines = ["### claim cost vs terminal rows (venturi, ms per claim round trip, median)\n",
             "| completed rows | pending rows | claim 1 (p90) | × smallest | claim 100 (p90) | × smallest |",
             "|---|---|---|---|---|---|"]

    def cell(limit: int, size: int) -> tuple[str, str]:
        vals = [r for r in rows if r["limit"] == limit and r["terminal_rows"] == size]
        base = [r for r in rows if r["limit"] == limit and r["terminal_rows"] == sizes[0]]
        if not vals or not base:
            return "—", "—"
        v = statistics.median(r["value"] for r in vals)
        b = statistics.median(r["value"] for r in base)
        p90 = statistics.median(r["p90"] for r in vals)
        return f"{v:.2f} ({p90:.2f})", f"{v / b:.2f}"

    for size in sizes:
        pend = next(r["pending_rows"] for r in rows if r["terminal_rows"] == size)
        c1, r1 = cell(1, size)
        c100, r100 = cell(100, size)
        lines.append(f"| {size:,} | {pend:,} | {c1} | {r1} | {c100} | {r100} |")
    return "\n".join(lines) + "\n"
