"""A queue table that stays small: claim cost, drain rate and sizes with N terminal jobs kept vs archived.

    python bench/archive_scale.py                          # N = 1M, a throwaway cluster
    python bench/archive_scale.py --sizes 1000000,3000000 --out docs/bench-runs/round4-archive
    python bench/archive_scale.py --sizes 10000000 --modes archived --move 1000000   # 10M archived

For each N and each mode, in a fresh database of one throwaway cluster:

* ``kept``: N ``completed`` jobs (one journal row each) stay in ``<prefix>_jobs``
  (``Queue(archive_after=None)``, the behaviour before migration v9);
* ``archived``: ``--move`` of the N jobs (all of them by default) are seeded the
  same way, then moved by ``queue.archive`` (timed: the archive rate); the rest of
  N are copies of the moved archive rows made in SQL (``bench/archive_seed.py``:
  the same rows, new ids, in minutes instead of the move's 15-30 minutes per 10M);
  then ``VACUUM`` (not FULL) of the jobs and journal tables, as autovacuum would
  do; the worker runs with ``archive_after=0`` so it keeps archiving what it drains.

Then, after ``VACUUM ANALYZE`` and ``CHECKPOINT``: the sizes of every table and
its indexes; the worker's own claim of 100 jobs (``storage.claim``, claimed and
rolled back, ``--samples`` times, median and p90; ``EXPLAIN (ANALYZE,
BUFFERS)`` kept); a drain of ``--pending`` no-op jobs by one ``Worker``
(concurrency 10), jobs/s from start to empty.  The claim and the drain run
twice: ``clean``, and ``xmin`` with a REPEATABLE READ transaction opened in
another connection (its snapshot taken) before the pending jobs are enqueued
and held until the drain ends, so no row version they leave can be vacuumed.
Last, retention: ``queue.cleanup`` of every terminal job (a cutoff past
tomorrow: the archive's days are dropped whole, the kept rows deleted in
batches), timed, and the sizes after a plain ``VACUUM``.
Writes ``archive_scale.jsonl`` and ``archive_scale.md`` under ``--out``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import threading
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg2
import sqlalchemy as sa
from archive_seed import seed_archived, seed_completed
from marshmallow import Schema, fields
from sqlalchemy.orm import Session

import alembic_venturi
from venturi_sa import JobContext, Queue, Task, Worker, make_models
from venturi_sa.devtools.throwaway import ThrowawayCluster
from venturi_sa.storage import claim as claims
from venturi_sa.storage.params import ClaimParams

PREFIX = "arc"
PG_SETTINGS = {"shared_buffers": "256MB", "max_wal_size": "4GB", "checkpoint_timeout": "30min",
               "synchronous_commit": "off"}
SIZES = f"""
SELECT t.name, sum(pg_table_size(p.relid)), sum(pg_indexes_size(p.relid))
  FROM (VALUES ('{PREFIX}_jobs'), ('{PREFIX}_journal'), ('{PREFIX}_archive')) AS t(name),
       LATERAL (SELECT relid FROM pg_partition_tree(t.name::regclass) WHERE relid IS NOT NULL
                UNION SELECT t.name::regclass) AS p
 GROUP BY t.name ORDER BY t.name
"""


class NoopPayload(Schema):
    seq = fields.Integer(required=True)


class Noop(Task):
    KIND = "noop"
    Payload = NoopPayload

    def run(self, ctx: JobContext) -> None:
        return None


def admin(dsn: str, *sqls: str, params: dict[str, Any] | None = None) -> None:
    conn = psycopg2.connect(dsn)
    conn.autocommit = True
    try:
        with conn.cursor() as cur:
            for sql in sqls:
                cur.execute(sql, params)
    finally:
        conn.close()


def libpq(url: str) -> str:
    return url.replace("postgresql+psycopg2://", "postgresql://")


def claim_params() -> ClaimParams:
    return ClaimParams(worker_id="archive-scale", kinds=[Noop.KIND], limit=100,
                       leases={Noop.KIND: Noop.lease}, default_lease=timedelta(seconds=60))


def time_claims(engine: sa.Engine, models: Any, samples: int) -> list[float]:
    """Claim 100 pending jobs ``samples`` times (after 3 warm-ups), each rolled back; ms per claim."""
    times: list[float] = []
    with Session(engine) as session:
        for i in range(samples + 3):
            t0 = time.perf_counter()
            jobs = claims.claim(models, session, claim_params())
            elapsed = time.perf_counter() - t0
            session.rollback()
            if len(jobs) != 100:
                raise RuntimeError(f"claim of 100 returned {len(jobs)} jobs")
            if i >= 3:
                times.append(elapsed * 1000)
    return times


def explain_claim(engine: sa.Engine, models: Any) -> str:
    seen: list[tuple[str, Any]] = []

    def capture(conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, many: bool) -> None:
        if "FOR UPDATE SKIP LOCKED" in statement and not seen:
            seen.append((statement, parameters))

    sa.event.listen(engine, "before_cursor_execute", capture)
    try:
        with Session(engine) as session:
            claims.claim(models, session, claim_params())
            session.rollback()
    finally:
        sa.event.remove(engine, "before_cursor_execute", capture)
    raw = engine.raw_connection()
    try:
        cur = raw.cursor()
        cur.execute("EXPLAIN (ANALYZE, BUFFERS) " + seen[0][0], seen[0][1])
        plan = "\n".join(r[0] for r in cur.fetchall())
        raw.rollback()
        return plan
    finally:
        raw.close()


def sizes(engine: sa.Engine) -> dict[str, tuple[int, int]]:
    with engine.connect() as conn:
        return {r[0]: (int(r[1]), int(r[2])) for r in conn.execute(sa.text(SIZES))}


def enqueue(engine: sa.Engine, queue: Queue, n: int, start: int) -> None:
    with Session(engine) as session, session.begin():
        for first in range(start, start + n, 1000):
            queue.enqueue_many(session, [Noop(seq=s) for s in range(first, min(start + n, first + 1000))],
                               ids_only=True)


def drain(engine: sa.Engine, queue: Queue, models: Any, n: int) -> float:
    """Run one Worker until no pending job is left; jobs/s."""
    worker = Worker(queue, engine, concurrency=10, recover_interval=1.0, poll_interval=0.5)
    thread = threading.Thread(target=worker.run, daemon=True)
    pending = sa.select(sa.func.count()).select_from(models.jobs_table).where(
        models.jobs_table.c.status.in_(("pending", "claimed")))
    t0 = time.monotonic()
    thread.start()
    with engine.connect() as conn:
        while conn.execute(pending).scalar_one() > 0:
            conn.rollback()
            time.sleep(0.05)
    elapsed = time.monotonic() - t0
    worker.stop()
    thread.join(60)
    return n / elapsed


def one(cluster: ThrowawayCluster, n: int, mode: str, pending: int, samples: int, move: int | None,
        log: Any) -> list[dict[str, Any]]:
    db = f"arc_{mode}_{n}"
    base = libpq(cluster.url)
    admin(base, f'DROP DATABASE IF EXISTS "{db}"', f'CREATE DATABASE "{db}"')
    url = cluster.url.rsplit("/", 1)[0] + f"/{db}"
    engine = sa.create_engine(url)
    rows: list[dict[str, Any]] = []
    try:
        alembic_venturi.upgrade(engine, PREFIX)
        models = make_models(PREFIX)
        queue = Queue(models, [Noop], archive_after=timedelta(0) if mode == "archived" else None)
        base_row = {"terminal": n, "mode": mode}
        if mode == "archived":
            done = seed_archived(url, PREFIX, n, move=move or n, log=lambda line: log(f"{mode} N={n:,}: {line}"))
            rows.append({**base_row, "metric": "archive_rate", "value": done["moved"] / done["move_s"],
                         "unit": "jobs/s", "seconds": done["move_s"], "moved": done["moved"],
                         "copied": done["copied"]})
        else:
            t0 = time.monotonic()
            for first in range(1, n + 1, 500_000):
                seed_completed(engine, PREFIX, first, min(n, first + 499_999))
            log(f"{mode} N={n:,}: seeded in {time.monotonic() - t0:.0f} s")
        admin(libpq(url), f"VACUUM ANALYZE {PREFIX}_jobs", f"VACUUM ANALYZE {PREFIX}_journal",
              f"ANALYZE {PREFIX}_archive", "CHECKPOINT")
        for table, (heap, index) in sizes(engine).items():
            rows.append({**base_row, "metric": "size", "table": table, "heap_bytes": heap, "index_bytes": index})
        for condition in ("clean", "xmin"):
            holder = None
            if condition == "xmin":
                holder = psycopg2.connect(libpq(url))
                holder.set_session(isolation_level="REPEATABLE READ")
                holder.cursor().execute("SELECT count(*) FROM pg_class")  # the snapshot is taken and held
            try:
                enqueue(engine, queue, pending, start=n + 1 if condition == "clean" else n + 1 + pending)
                if condition == "clean":
                    admin(libpq(url), f"ANALYZE {PREFIX}_jobs")
                times = time_claims(engine, models, samples)
                plan = explain_claim(engine, models)
                rows.append({**base_row, "condition": condition, "metric": "claim100_ms",
                             "value": statistics.median(times), "p90": sorted(times)[int(0.9 * (len(times) - 1))],
                             "samples": len(times), "plan": plan})
                rate = drain(engine, queue, models, pending)
                rows.append({**base_row, "condition": condition, "metric": "drain", "value": rate, "unit": "jobs/s",
                             "n": pending})
                after = sizes(engine)
                rows.append({**base_row, "condition": condition, "metric": "size_after_drain",
                             **{f"{t}_bytes": h + i for t, (h, i) in after.items()}})
                log(f"{mode} N={n:,} {condition}: claim100 {statistics.median(times):.2f} ms, drain {rate:,.0f} jobs/s")
            finally:
                if holder is not None:
                    holder.rollback()
                    holder.close()
        # Retention: every terminal job goes (the cutoff is past tomorrow, so the archive's days end before it).
        with engine.connect() as conn:
            cutoff = conn.execute(sa.text("SELECT now() + interval '3 days'")).scalar_one()
        t0 = time.monotonic()
        deleted = queue.cleanup(engine, before=cutoff, batch_size=5000)
        seconds = time.monotonic() - t0
        admin(libpq(url), f"VACUUM {PREFIX}_jobs", f"VACUUM {PREFIX}_journal")
        after = sizes(engine)
        rows.append({**base_row, "metric": "cleanup", "deleted": deleted, "seconds": seconds,
                     **{f"{t}_bytes_after_vacuum": h + i for t, (h, i) in after.items()}})
        log(f"{mode} N={n:,}: cleanup of {deleted:,} jobs in {seconds:.1f} s")
    finally:
        engine.dispose()
        admin(base, f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
    return rows


def mib(b: int) -> str:
    return f"{b / 1048576:,.1f}"


def table(rows: list[dict[str, Any]]) -> str:
    out = []
    for n in sorted({r["terminal"] for r in rows}):
        out += [f"### N = {n:,} terminal jobs\n",
                "| mode | condition | claim 100 median (p90) ms | drain jobs/s |",
                "|---|---|---|---|"]
        for mode in ("kept", "archived"):
            for condition in ("clean", "xmin"):
                claim = [r for r in rows if (r["terminal"], r["mode"], r.get("condition"), r["metric"])
                         == (n, mode, condition, "claim100_ms")]
                rate = [r for r in rows if (r["terminal"], r["mode"], r.get("condition"), r["metric"])
                        == (n, mode, condition, "drain")]
                if claim and rate:
                    out.append(f"| {mode} | {condition} | {claim[0]['value']:.2f} ({claim[0]['p90']:.2f}) | "
                               f"{rate[0]['value']:,.0f} |")
        out += ["", "| mode | table | heap MiB | indexes MiB |", "|---|---|---|---|"]
        for r in rows:
            if r["terminal"] == n and r["metric"] == "size":
                out.append(f"| {r['mode']} | {r['table']} | {mib(r['heap_bytes'])} | {mib(r['index_bytes'])} |")
        out += ["", "| mode | cleanup of every terminal job | s | jobs + journal + archive MiB after (plain VACUUM) |",
                "|---|---|---|---|"]
        for r in rows:
            if r["terminal"] == n and r["metric"] == "cleanup":
                total = sum(v for k, v in r.items() if k.endswith("_bytes_after_vacuum"))
                out.append(f"| {r['mode']} | {r['deleted']:,} | {r['seconds']:.1f} | {mib(total)} |")
        for r in rows:
            if r["terminal"] == n and r["metric"] == "archive_rate":
                copied = f", then {r['copied']:,} copies of them made in SQL" if r.get("copied") else ""
                out.append(f"\narchive rate: {r['value']:,.0f} jobs/s ({r['seconds']:.0f} s for the "
                           f"{r.get('moved', n):,} jobs moved by queue.archive{copied})")
        out.append("")
    return "\n".join(out) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000000")
    parser.add_argument("--modes", default="kept,archived")
    parser.add_argument("--pending", type=int, default=10_000)
    parser.add_argument("--samples", type=int, default=30)
    parser.add_argument("--move", type=int, help="archived mode: jobs moved by queue.archive (default all of N); "
                        "the rest of N are copies of them")
    parser.add_argument("--out", default="bench-results/archive_scale")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []

    def log(line: str) -> None:
        print(time.strftime("%H:%M:%S"), line, flush=True)

    with ThrowawayCluster(PG_SETTINGS) as cluster:
        for n in (int(s) for s in args.sizes.split(",")):
            for mode in args.modes.split(","):
                found = one(cluster, n, mode, args.pending, args.samples, args.move, log)
                rows += found
                with (out / "archive_scale.jsonl").open("a") as f:
                    for row in found:
                        f.write(json.dumps(row) + "\n")
                (out / "archive_scale.md").write_text(table(rows))
    print(table(rows))


if __name__ == "__main__":
    main()
