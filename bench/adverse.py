"""The adverse-conditions benchmark: drain throughput under four bad conditions, as a ratio to a clean drain.

    bench/.venv/bin/python bench/adverse.py                       # venturi and PgQueuer, 3 repeats
    bench/.venv/bin/python bench/adverse.py --quick --repeats 1   # smoke run (CI: test_bench_smoke.py)

Conditions, each against ``clean`` (the default worker profile of each
system draining ``--n`` no-op jobs, the harness's drain measurement):

* ``terminal``: ``--terminal-rows`` (1M) finished jobs in the system's tables
  before the drain (venturi: ``completed`` rows in its jobs table, where
  they stay until cleanup; PgQueuer deletes finished jobs from its queue
  table, so they go to its ``pgqueuer_log`` table);
* ``xmin``: a REPEATABLE READ transaction opened before the workers start
  and held for the whole drain, so no dead row version can be vacuumed;
* ``archived``: ``--terminal-rows`` finished jobs in the system's history
  (venturi: its archive, filled by ``bench/archive_seed.py``: 200,000 moved by
  ``queue.archive``, the rest copies of them; PgQueuer: its ``pgqueuer_log``,
  as in ``terminal``); ``archived_xmin``: the same, and the xmin held as in
  ``xmin``.  The history's and the queue table's sizes (heap + indexes) are
  recorded after seeding and after the drain;
* ``poison``: 5 % of the jobs raise on their first two runs and are retried
  at once (``bench/adverse_adapters.py``);
* ``procs8``: 8 worker processes of the default profile on this machine's cores.

Runs the harness's pieces (fresh databases, child processes, workers) the
way ``bench/run.py`` does, on a throwaway durable cluster or ``--port``.
Writes ``<out>/<stamp>/adverse.jsonl`` and ``adverse.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
SYSTEMS = {"venturi_sa": "venturi_sa_poison", "pgqueuer": "pgqueuer_poison"}
CONDITIONS = ("clean", "terminal", "xmin", "poison", "procs8", "archived", "archived_xmin")
QUEUE_TABLE = {"venturi_sa": "bench_jobs", "pgqueuer": "pgqueuer"}
SIZED_TABLES = {"venturi_sa": ("bench_jobs", "bench_journal", "bench_archive"),
                "pgqueuer": ("pgqueuer", "pgqueuer_log")}
SIZES = """
SELECT t.name, sum(pg_total_relation_size(p.relid))
  FROM unnest(%(names)s::text[]) AS t(name),
       LATERAL (SELECT relid FROM pg_partition_tree(t.name::regclass) WHERE relid IS NOT NULL
                UNION SELECT t.name::regclass) AS p
 GROUP BY t.name ORDER BY t.name
"""
SEED_SQL = {
    "venturi_sa": (
        "INSERT INTO bench_jobs (id, kind, payload, priority, status, created_at, visible_at, finished_at, "
        "run_count) SELECT 'T' || lpad(g::text, 25, '0'), 'noop', '{\"seq\": 0}', 1, 'completed', "
        "now() - interval '1 day', now() - interval '1 day', now() - interval '1 hour', 1 "
        "FROM generate_series(1, %(n)s) AS g"),
    "pgqueuer": (
        "INSERT INTO pgqueuer_log (id, job_id, status, priority, entrypoint, created, aggregated) "
        "SELECT g + 1000000000000, g + 1000000000000, 'successful', 0, 'noop', now() - interval '1 hour', false "
        "FROM generate_series(1, %(n)s) AS g"),
}


def orchestrator_log(line: str) -> None:
    from peerbench import orchestrator

    orchestrator.log(line)


def sizes(dsn: str, system: str) -> dict[str, int]:
    """Heap + indexes + TOAST in bytes of each of ``system``'s queue and history tables (partitions summed)."""
    import psycopg2

    conn = psycopg2.connect(dsn)
    try:
        with conn.cursor() as cur:
            cur.execute(SIZES, {"names": list(SIZED_TABLES[system])})
            return {name: int(size) for name, size in cur.fetchall()}
    finally:
        conn.close()


def drain(runner: Any, r: int, system: str, condition: str, n: int, terminal_rows: int,
          archive_move: int = 200_000) -> dict[str, Any]:
    """One drain of ``n`` jobs by ``system`` under ``condition``; jobs/s from the first READY to empty."""
    import psycopg2
    from peerbench import registry

    worker_system = SYSTEMS[system] if condition == "poison" else system
    adapter = registry.load(system)
    db = f"pb_adv_{system}_{condition}_{r}"
    dsn = runner.fresh_db(db)
    holder = None
    seeded: dict[str, Any] = {}
    procs: list[Any] = []
    try:
        runner.child("setup", "--system", system, "--dsn", dsn)
        if condition == "terminal" or (condition.startswith("archived") and system != "venturi_sa"):
            seed = psycopg2.connect(dsn)
            with seed, seed.cursor() as cur:
                cur.execute(SEED_SQL[system], {"n": terminal_rows})
            seed.close()
        elif condition.startswith("archived"):
            from archive_seed import seed_archived

            seeded = seed_archived(dsn.replace("postgresql://", "postgresql+psycopg2://", 1), "bench",
                                   terminal_rows, move=archive_move, log=orchestrator_log)
        sized = sizes(dsn, system) if condition.startswith("archived") else {}
        runner.child("enqueue", "--system", system, "--dsn", dsn, "--mode", "bulk", "--n", str(n),
                     "--chunk", "1000")
        runner.settle(dsn)
        if condition.endswith("xmin"):
            holder = psycopg2.connect(dsn)
            holder.set_session(isolation_level="REPEATABLE READ")
            holder.cursor().execute("SELECT count(*) FROM pg_class")  # the snapshot is taken and held
        # The queue table is locked until every worker printed READY: all of them start draining together.
        gate = psycopg2.connect(dsn)
        gate.cursor().execute(f"LOCK TABLE {QUEUE_TABLE[system]} IN ACCESS EXCLUSIVE MODE")
        count = 8 if condition == "procs8" else 1
        try:
            with ThreadPoolExecutor(count) as pool:
                started = list(pool.map(lambda i: runner.spawn_worker(
                    worker_system, dsn, "default", f"adv-r{r}-{system}-{condition}-{i}"), range(count)))
            procs.extend(proc for proc, _, _ in started)
        finally:
            t0 = time.monotonic()
            gate.commit()
            gate.close()
        poll = psycopg2.connect(dsn)
        poll.autocommit = True
        cur = poll.cursor()
        remaining = start = n
        while remaining > 0 and time.monotonic() - t0 < runner.cfg.drain_timeout_s:
            time.sleep(runner.cfg.poll_s)
            cur.execute(adapter.remaining_sql)
            remaining = cur.fetchone()[0]
        elapsed = time.monotonic() - t0
        poll.close()
        row = {"run": r, "phase": "adverse", "system": system, "condition": condition, "n": start - remaining,
               "seconds": elapsed, "value": (start - remaining) / elapsed, "unit": "jobs/s", "processes": count,
               "timed_out": remaining > 0,
               "terminal_rows": terminal_rows if condition in ("terminal", "archived", "archived_xmin") else 0}
        if sized:
            row.update(bytes_seeded=sized, bytes_drained=sizes(dsn, system), seeded=seeded)
        runner.record(**row)
        return row
    finally:
        for proc in procs:
            runner.stop_worker(proc)
        if holder is not None:
            holder.rollback()
            holder.close()
        runner.drop_db(db)


def table(rows: list[dict[str, Any]], systems: list[str], conditions: list[str]) -> str:
    """Median jobs/s per (system, condition) and the median same-repeat ratio to ``clean``."""
    def runs(system: str, condition: str) -> dict[int, float]:
        return {r["run"]: r["value"] for r in rows if r["system"] == system and r["condition"] == condition}

    head = ["condition"] + [f"{s} jobs/s" for s in systems] + [f"{s} ÷ clean" for s in systems]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for condition in conditions:
        cells = [condition]
        ratios = []
        for system in systems:
            values = runs(system, condition)
            cells.append(f"{statistics.median(values.values()):,.0f}" if values else "—")
            clean = runs(system, "clean")
            pairs = [values[k] / clean[k] for k in values if k in clean and clean[k]]
            ratios.append(f"{statistics.median(pairs):.2f}" if pairs else "—")
        lines.append("| " + " | ".join(cells + ratios) + " |")
    return "\n".join(lines) + "\n"


def size_table(rows: list[dict[str, Any]]) -> str:
    """Each table's size (MiB, heap + indexes + TOAST) after seeding and after the drain, per archived run."""
    lines = ["| repeat | condition | system | table | MiB seeded | MiB after the drain |", "|---|---|---|---|---|---|"]
    for r in rows:
        for name, seeded in r.get("bytes_seeded", {}).items():
            after = r["bytes_drained"].get(name, 0)
            lines.append(f"| {r['run']} | {r['condition']} | {r['system']} | {name} | {seeded / 1048576:,.1f} | "
                         f"{after / 1048576:,.1f} |")
    return "\n".join(lines) + "\n" if len(lines) > 2 else ""


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--systems", default="venturi_sa,pgqueuer")
    p.add_argument("--conditions", default=",".join(CONDITIONS))
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--n", type=int, default=10_000, help="jobs per drain")
    p.add_argument("--terminal-rows", type=int, default=1_000_000)
    p.add_argument("--archive-move", type=int, default=200_000,
                   help="archived conditions: jobs venturi moves by queue.archive; the rest are copies of them")
    p.add_argument("--quick", action="store_true", help="tiny sizes (CI smoke test)")
    p.add_argument("--host", default="127.0.0.1", help="with --port: use this server instead of a throwaway one")
    p.add_argument("--port", type=int, help="an existing server (superuser) on --host")
    p.add_argument("--user", default="postgres")
    p.add_argument("--out", type=Path, default=BENCH_DIR / "results")
    a = p.parse_args(argv)
    if a.quick:
        a.n, a.terminal_rows = min(a.n, 300), min(a.terminal_rows, 2_000)
        a.archive_move = min(a.archive_move, max(1, a.terminal_rows // 4))  # so the copies are made too
    sys.path.insert(0, str(BENCH_DIR))
    import run as bench_run
    from ab_kit import server

    harness = bench_run.find_harness()
    bench_run.load_harness(harness)
    os.environ["PEERBENCH_HOME"] = str(harness)
    os.environ["PYTHONDONTWRITEBYTECODE"] = "1"
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [str(BENCH_DIR), str(harness), *filter(None, [os.environ.get("PYTHONPATH")])])
    from peerbench import orchestrator

    orchestrator.PEERS = BENCH_DIR / "run.py"
    systems, conditions = a.systems.split(","), a.conditions.split(",")
    with server(a.port) as port:
        cfg = orchestrator.Config(host=a.host, port=port, user=a.user, systems=tuple(systems), out_dir=a.out,
                                  drain_timeout_s=60 if a.quick else 300)
        runner = orchestrator.Runner(cfg)
        rows = []
        for r in range(1, a.repeats + 1):
            for condition in conditions:
                for system in systems:
                    orchestrator.log(f"[r{r}] adverse {condition} {system}")
                    rows.append(drain(runner, r, system, condition, a.n, a.terminal_rows, a.archive_move))
        text = (f"# Adverse conditions: drain of {a.n:,} no-op jobs, default worker profile, "
                f"{a.repeats} repeat(s), terminal rows {a.terminal_rows:,}\n\n" + table(rows, systems, conditions))
        if size_table(rows):
            text += "\nSizes of the queue and history tables (archived conditions):\n\n" + size_table(rows)
        (runner.run_dir / "adverse.md").write_text(text)
        (runner.run_dir / "adverse.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        print(text)
        print(f"results: {runner.run_dir}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
