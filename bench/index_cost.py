#!/usr/bin/env python
"""What each index on ``<prefix>_jobs`` costs a bulk enqueue, and which query it serves.

    bench/.venv/bin/python bench/index_cost.py                   # 5 rounds x 20,000 jobs per variant
    bench/.venv/bin/python bench/index_cost.py --rounds 3 --n 50000 --terminal 200000 --port 5432

On one durable throwaway cluster (``bench/run.py``'s settings; or ``--port``):

1. **Insert cost.**  Each round runs every variant once, in a new order each
   round: the table is truncated, the variant's index is dropped, ``--n`` jobs
   are enqueued with ``queue.enqueue_many(..., ids_only=True)`` + commit in
   chunks of 1,000 (the harness's ``enqueue_bulk``), and the index is created
   again.  Variants: ``all`` (the schema as migrated), ``-<index>`` for each
   secondary index, and ``-visible-created`` (both indexes a pending row has
   beyond what the harness's raw_psycopg2 schema has).  Prints jobs/s per
   round, each variant's median same-round ratio to ``all``, and each index's
   size per pending row after the insert.
2. **Queries.**  Seeds ``--terminal`` finished jobs, ``--pending`` pending ones
   (a tenth with a dedup key, a tenth due in the future) and ``--claimed``
   claimed ones with expired leases, over five kinds; ANALYZE; captures the
   SQL that venturi sends for the claim, the soonest-visible wait, the dedup
   lookup, lease recovery, history listings, cleanup and stats (the ``Queue``
   and storage functions themselves, statements caught from the engine), and
   runs ``EXPLAIN (ANALYZE, FORMAT JSON)`` of each in a transaction that is
   rolled back, once with every index and once with each index dropped (DDL is
   transactional: the drop is rolled back too).  Prints per query the indexes
   its plan uses and its planning + execution time with each index dropped.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
PREFIX = "idx"
KINDS = ("noop", "mail", "sync", "report", "thumb")


def _indexes(conn: Any) -> dict[str, str]:
    """Secondary index name -> its CREATE INDEX statement, for the jobs table."""
    cur = conn.cursor()
    cur.execute("SELECT indexname, indexdef FROM pg_indexes WHERE tablename = %s AND indexname <> %s "
                "ORDER BY indexname", (f"{PREFIX}_jobs", f"{PREFIX}_jobs_pkey"))
    return dict(cur.fetchall())


def _short(index: str) -> str:
    return index.removeprefix(f"{PREFIX}_jobs_")


# ------------------------------------------------------------------------------ insert cost
def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far (Linux ``/proc``; the server runs on this machine)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def insert_cost(dsn: str, admin: Any, n: int, rounds: int) -> str:
    import sqlalchemy as sa
    from ab_kit import load, noop_queue
    from sqlalchemy.orm import Session

    queue, noop = noop_queue(PREFIX)
    engine = sa.create_engine(dsn)
    raw = engine.raw_connection()
    conn = raw.driver_connection
    conn.autocommit = True
    defs = _indexes(conn)
    variants: dict[str, tuple[str, ...]] = {"all": ()}
    variants.update({f"-{_short(i)}": (i,) for i in defs})
    variants["-visible-created"] = (f"{PREFIX}_jobs_visible", f"{PREFIX}_jobs_created")
    rates: dict[str, list[float]] = {v: [] for v in variants}
    server_us: dict[str, list[float]] = {v: [] for v in variants}
    wal: dict[str, list[float]] = {v: [] for v in variants}
    sizes: dict[str, list[float]] = {i: [] for i in [*defs, f"{PREFIX}_jobs_pkey", f"{PREFIX}_jobs"]}
    tasks = [noop(seq=s) for s in range(n)]
    out = [f"## insert cost: {n:,} jobs per variant, enqueue_many(1,000, ids_only=True) + commit; {load()}\n"]
    cur = conn.cursor()
    with Session(engine) as session:  # the pool's one connection: its server process is the one measured
        backend = session.execute(sa.text("SELECT pg_backend_pid()")).scalar_one()
    for r in range(rounds):
        order = list(variants)
        random.Random(r).shuffle(order)
        for name in order:
            cur.execute(f"TRUNCATE {PREFIX}_jobs CASCADE")
            for index in variants[name]:
                cur.execute(f"DROP INDEX {index}")
            cur.execute("CHECKPOINT")
            cur.execute("SELECT pg_current_wal_insert_lsn()")
            lsn0 = cur.fetchone()[0]
            cpu0 = _cpu_seconds(backend)
            t0 = time.perf_counter()
            for start in range(0, n, 1000):
                with Session(engine) as session:
                    queue.enqueue_many(session, tasks[start:start + 1000], ids_only=True)
                    session.commit()
            rates[name].append(n / (time.perf_counter() - t0))
            server_us[name].append(1e6 * (_cpu_seconds(backend) - cpu0) / n)
            cur.execute("SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), %s)", (lsn0,))
            wal[name].append(float(cur.fetchone()[0]) / n)
            if name == "all":
                for rel in sizes:
                    cur.execute("SELECT pg_relation_size(%s)", (rel,))
                    sizes[rel].append(cur.fetchone()[0] / n)
            for index in variants[name]:
                cur.execute(defs[index])
        out.append(f"round {r + 1}: " + ", ".join(f"{v} {rates[v][-1]:,.0f}/s {server_us[v][-1]:.1f} µs"
                                                  for v in variants) + f"; {load()}")
    out += ["", "Server CPU: the inserting connection's server process (user + system time, /proc); WAL: bytes "
            "written per job.  Medians over rounds; ratios are same-round pairs.", "",
            "| variant | jobs/s | ÷ all | server CPU µs/job | ÷ all | WAL bytes/job | ÷ all |",
            "|---|---|---|---|---|---|---|"]
    def ratio(values: dict[str, list[float]], name: str) -> float:
        return statistics.median(a / b for a, b in zip(values[name], values["all"], strict=True) if b)

    for name in variants:
        out.append(f"| {name} | {statistics.median(rates[name]):,.0f} | {ratio(rates, name):.3f} | "
                   f"{statistics.median(server_us[name]):.1f} | {ratio(server_us, name):.3f} | "
                   f"{statistics.median(wal[name]):.0f} | {ratio(wal, name):.3f} |")
    out += ["", "| relation | bytes per pending row (after the insert) |", "|---|---|"]
    out += [f"| {rel} | {statistics.median(v):.1f} |" for rel, v in sizes.items()]
    raw.close()
    engine.dispose()
    return "\n".join(out) + "\n"


# ------------------------------------------------------------------------------ queries
def seed(conn: Any, terminal: int, pending: int, claimed: int) -> None:
    """Finished, pending (some deduplicable, some future) and claimed-expired jobs over :data:`KINDS`."""
    cur = conn.cursor()
    cur.execute(f"TRUNCATE {PREFIX}_jobs CASCADE")
    kinds = "(ARRAY['" + "','".join(KINDS) + "'])[1 + g %% 5]"  # constants of this file, not input
    cur.execute(f"""
        INSERT INTO {PREFIX}_jobs (id, kind, payload, priority, status, created_at, visible_at, finished_at,
                                   run_count)
        SELECT 't' || lpad(g::text, 25, '0'), {kinds}, '{{"seq": 1}}', 1,
               CASE WHEN g %% 50 = 0 THEN 'dead' ELSE 'completed' END,
               now() - interval '10 days' + g * interval '3 seconds',
               now() - interval '10 days' + g * interval '3 seconds',
               now() - interval '10 days' + g * interval '3 seconds' + interval '1 second', 1
        FROM generate_series(1, %s) g""", (terminal,))
    cur.execute(f"""
        INSERT INTO {PREFIX}_jobs (id, kind, payload, priority, status, created_at, visible_at, dedup_key)
        SELECT 'p' || lpad(g::text, 25, '0'), {kinds}, '{{"seq": 1}}', g %% 3, 'pending',
               now() - interval '1 hour' + g * interval '10 ms',
               CASE WHEN g %% 10 = 1 THEN now() + interval '1 hour' ELSE now() - interval '1 hour' END,
               CASE WHEN g %% 10 = 2 THEN 'key-' || (g %% 500) END
        FROM generate_series(1, %s) g""", (pending,))
    cur.execute(f"""
        INSERT INTO {PREFIX}_jobs (id, kind, payload, priority, status, created_at, visible_at, claimed_by,
                                   claim_expires_at, run_count)
        SELECT 'c' || lpad(g::text, 25, '0'), {kinds}, '{{"seq": 1}}', 1, 'claimed',
               now() - interval '2 hours', now() - interval '2 hours', 'gone:1',
               now() - interval '1 minute' + CASE WHEN g %% 2 = 0 THEN interval '1 hour' ELSE interval '0' END, 1
        FROM generate_series(1, %s) g""", (claimed,))
    cur.execute(f"VACUUM ANALYZE {PREFIX}_jobs")


def capture(dsn: str) -> list[tuple[str, str, Any]]:
    """``(query, SQL, parameters)`` of what venturi sends for each query an index on the jobs table serves."""
    import sqlalchemy as sa
    from sqlalchemy.orm import Session

    import venturi_sa
    from venturi_sa.storage import claim, enqueue, leases
    from venturi_sa.storage.enqueue import MergeTargetParams
    from venturi_sa.storage.params import ClaimParams, RecoverParams, SoonestParams

    models = venturi_sa.make_models(PREFIX)
    queue = venturi_sa.Queue(models)
    engine = sa.create_engine(dsn)
    seen: list[tuple[str, str, Any]] = []
    label = [""]

    @sa.event.listens_for(engine, "before_cursor_execute")
    def note(conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, many: bool) -> None:
        if f"{PREFIX}_jobs" in statement and statement.lstrip().upper().startswith(("SELECT", "UPDATE", "DELETE",
                                                                                     "WITH")):
            seen.append((label[0], statement, parameters))

    one = ClaimParams(worker_id="idx:1", kinds=["noop"], limit=10, leases={}, default_lease=timedelta(seconds=60),
                      caps={})
    every = ClaimParams(worker_id="idx:1", kinds=list(KINDS), limit=100, leases={},
                        default_lease=timedelta(seconds=60), caps={})
    calls: list[tuple[str, Any]] = [
        ("claim, 1 kind, limit 10", lambda s: claim.claim(models, s, one)),
        ("claim, 5 kinds, limit 100", lambda s: claim.claim(models, s, every)),
        ("soonest visible_at (idle wait)",
         lambda s: claim.seconds_until_visible(models, s, SoonestParams(kinds=list(KINDS)))),
        ("dedup: oldest pending sibling", lambda s: enqueue.oldest_pending_sibling(
            models, s, MergeTargetParams(kind="mail", dedup_key="key-2"))),
        ("lease recovery", lambda s: leases.recover(models, s, RecoverParams(max_failures=dict.fromkeys(KINDS, 5)))),
    ]
    for name, call in calls:
        label[0] = name
        with Session(engine) as session:
            call(session)
            session.rollback()
    now = datetime.now(timezone.utc)
    ops: list[tuple[str, Any]] = [
        ("history, newest first", lambda: queue.history(engine)),
        ("history, status=dead", lambda: queue.history(engine, status="dead")),
        ("history, status=completed, kind, finished window", lambda: queue.history(
            engine, status="completed", kind="mail", finished_after=now - timedelta(days=5),
            finished_before=now - timedelta(days=4))),
        ("cleanup, status=completed (dry run count)", lambda: queue.cleanup(
            engine, before=now - timedelta(days=5), status="completed", dry_run=True)),
        ("cleanup, any terminal status (dry run count)", lambda: queue.cleanup(
            engine, before=now - timedelta(days=5), dry_run=True)),
        ("stats", lambda: queue.stats(engine)),
        # these delete (the rows are seeded again before the EXPLAINs): a batch of the oldest day's half
        ("cleanup, status=completed, a batch of 1,000", lambda: queue.cleanup(
            engine, before=now - timedelta(days=9, hours=12), status="completed")),
        ("cleanup, any terminal status, a batch of 1,000", lambda: queue.cleanup(
            engine, before=now - timedelta(days=9, hours=12))),
    ]
    for name, op in ops:
        label[0] = name
        op()
    engine.dispose()
    return seen


def _plan_indexes(plan: dict[str, Any]) -> set[str]:
    found: set[str] = set()
    stack = [plan]
    while stack:
        node = stack.pop()
        if str(node.get("Index Name", "")).startswith(f"{PREFIX}_jobs"):
            found.add(node["Index Name"])
        if node.get("Node Type") == "Seq Scan" and node.get("Relation Name") == f"{PREFIX}_jobs":
            found.add("seq scan")
        stack.extend(node.get("Plans", []))
    return found


def explain(conn: Any, statement: str, parameters: Any, drop: str | None, rounds: int) -> tuple[float, set[str]]:
    """Median planning + execution ms of ``statement`` (with ``drop`` dropped), and the indexes it used."""
    times: list[float] = []
    used: set[str] = set()
    cur = conn.cursor()
    for i in range(rounds + 1):  # the first, not counted, warms the caches
        cur.execute("BEGIN")
        try:
            if drop:
                cur.execute(f"DROP INDEX {drop}")
            cur.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + statement, parameters)
            got = cur.fetchone()[0]
            doc = (json.loads(got) if isinstance(got, str) else got)[0]
            if i:
                times.append(doc["Planning Time"] + doc["Execution Time"])
            used = _plan_indexes(doc["Plan"])
        finally:
            cur.execute("ROLLBACK")
    return statistics.median(times), used


def queries(dsn: str, admin: Any, terminal: int, pending: int, claimed: int, rounds: int) -> str:
    import sqlalchemy as sa

    engine = sa.create_engine(dsn)
    raw = engine.raw_connection()
    conn = raw.driver_connection
    conn.autocommit = True
    defs = _indexes(conn)
    seed(conn, terminal, pending, claimed)
    statements = capture(dsn)
    seed(conn, terminal, pending, claimed)  # recovery and claims ran rolled back; start from the same rows
    names = [_short(i) for i in defs]
    out = [f"## queries: {terminal:,} terminal, {pending:,} pending, {claimed:,} claimed jobs over "
           f"{len(KINDS)} kinds; planning + execution ms (median of {rounds}) with every index, then with each "
           "dropped\n",
           "| query | indexes its plan uses | all | " + " | ".join(f"-{n}" for n in names) + " |",
           "|---|---|---|" + "---|" * len(names)]
    done: set[str] = set()
    for label, statement, parameters in statements:
        if label in done:  # the first statement of each call is the query; later ones are follow-ups
            continue
        done.add(label)
        base, used = explain(conn, statement, parameters, None, rounds)
        cells = []
        for index in defs:
            ms, without = explain(conn, statement, parameters, index, rounds)
            mark = "" if index not in used else f" ({', '.join(sorted(_short(u) for u in without))})"
            cells.append(f"{ms:.2f}{mark}")
        out.append(f"| {label} | {', '.join(sorted(_short(u) for u in used))} | {base:.2f} | " + " | ".join(cells)
                   + " |")
    out.append("\nIn brackets: the plan without that index (only where the full plan used it).")
    raw.close()
    engine.dispose()
    return "\n".join(out) + "\n"


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=20_000, help="jobs per insert variant")
    p.add_argument("--rounds", type=int, default=5, help="insert rounds (every variant once each)")
    p.add_argument("--terminal", type=int, default=200_000)
    p.add_argument("--pending", type=int, default=20_000)
    p.add_argument("--claimed", type=int, default=1_000)
    p.add_argument("--explain-rounds", type=int, default=3)
    p.add_argument("--skip", choices=("insert", "queries"), help="leave one part out")
    p.add_argument("--port", type=int, help="an existing superuser/trust server on 127.0.0.1")
    a = p.parse_args(argv)
    sys.path.insert(0, str(BENCH_DIR))
    from ab_kit import fresh_database, release

    cluster, dsn, admin = fresh_database(a.port, "index_cost", PREFIX)
    try:
        if a.skip != "insert":
            print(insert_cost(dsn, admin, a.n, a.rounds), flush=True)
        if a.skip != "queries":
            print(queries(dsn, admin, a.terminal, a.pending, a.claimed, a.explain_rounds), flush=True)
    finally:
        release(cluster, admin)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
