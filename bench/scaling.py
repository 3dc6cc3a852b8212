#!/usr/bin/env python
"""Why N worker processes do (not) drain faster than one: the same drain at 1 and N processes, measured inside.

    bench/.venv/bin/python bench/scaling.py --processes 1,2 --rounds 3
    bench/.venv/bin/python bench/scaling.py --processes 1,2 --rounds 1 --py-spy   # + a GIL profile per child

On one durable throwaway cluster (``bench/run.py``'s settings plus
``pg_stat_statements``), each round and process count: enqueue ``--n`` no-op
jobs, ``VACUUM ANALYZE``, reset the statement statistics, fork the worker
processes (each ``Worker(concurrency, batch_size, listen=False)
.run_until_idle()`` on its own engine; a gate starts them together), and
while they drain sample ``pg_stat_activity`` every 10 ms (what the queue's
backends wait on).  Reports per process count (medians over rounds): jobs/s,
worker CPU per job (all children, ``getrusage``), claims (calls, rows per
claim, mean execution ms), outcome batches (calls, rows, ms), commits and the
wait-event mix.  With ``--py-spy`` each child runs under ``py-spy record
--gil`` and its top functions are summarized (``profile_drain.summarize``).
"""

from __future__ import annotations

import argparse
import collections
import json
import multiprocessing as mp
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from ab_kit import noop_queue

BENCH_DIR = Path(__file__).resolve().parent
PREFIX = "scale"


def _queue() -> Any:
    return noop_queue(PREFIX)


def _worker(dsn: str, concurrency: int, batch_size: int, gate: str, index: int, out: Any) -> None:
    import sqlalchemy as sa

    import venturi_sa

    queue, _ = _queue()
    engine = sa.create_engine(dsn, pool_size=concurrency + 5, max_overflow=10)
    worker = venturi_sa.Worker(queue, engine, concurrency=concurrency, batch_size=batch_size, listen=False,
                               worker_id=f"scale-{index}")
    with engine.connect():
        pass
    Path(gate, f"ready-{index}").touch()
    while not Path(gate, "go").exists():
        time.sleep(0.002)
    before = resource.getrusage(resource.RUSAGE_SELF)
    n = worker.run_until_idle()
    after = resource.getrusage(resource.RUSAGE_SELF)
    engine.dispose()
    out.put({"index": index, "jobs": n, "cpu": after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime})


STATS = """
SELECT CASE WHEN query ILIKE 'WITH claimable%%' THEN 'claim'
            WHEN query ILIKE 'WITH done AS%%' THEN 'outcomes'
            WHEN query ILIKE 'COMMIT%%' THEN 'commit'
            WHEN query ILIKE 'BEGIN%%' THEN 'begin'
            ELSE left(regexp_replace(query, '\\s+', ' ', 'g'), 40) END AS what,
       sum(calls)::bigint, sum(rows)::bigint, sum(total_exec_time), sum(total_plan_time)
FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
GROUP BY 1 ORDER BY 4 DESC LIMIT 12
"""


def _sample_waits(dsn: str, stop: threading.Event, waits: collections.Counter[str]) -> None:
    import psycopg2

    conn = psycopg2.connect(dsn)
    conn.autocommit = True
    cur = conn.cursor()
    while not stop.wait(0.01):
        cur.execute("SELECT coalesce(wait_event_type || ':' || wait_event, 'CPU'), count(*) FROM pg_stat_activity "
                    "WHERE datname = current_database() AND state = 'active' AND pid <> pg_backend_pid() "
                    "GROUP BY 1")
        for what, n in cur.fetchall():
            waits[what] += n
    conn.close()


def _ticks(pid: int, children_too: bool = False) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = int(fields[11]) + int(fields[12])  # utime, stime
    return ticks + (int(fields[13]) + int(fields[14]) if children_too else 0)  # + reaped children's


def pg_cpu_seconds(postmaster: int) -> float:
    """CPU seconds used so far by the cluster: the postmaster, its live children and the ones it reaped."""
    total = _ticks(postmaster, children_too=True)
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
            if int(text.rsplit(")", 1)[1].split()[1]) == postmaster:
                total += _ticks(int(stat.parent.name))
        except (OSError, ValueError, IndexError):
            continue
    return total / os.sysconf("SC_CLK_TCK")


def machine_busy() -> tuple[float, float]:
    """(busy, total) jiffies of every CPU so far (``/proc/stat``; busy excludes idle and iowait)."""
    values = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    total = sum(values[:8])
    return total - values[3] - values[4], total


def _round(dsn: str, postmaster: int, processes: int, a: argparse.Namespace, spy_dir: Path | None) -> dict[str, Any]:
    import psycopg2
    import sqlalchemy as sa
    from sqlalchemy.orm import Session

    queue, noop = _queue()
    engine = sa.create_engine(dsn.replace("postgresql://", "postgresql+psycopg2://"))
    for start in range(0, a.n, 1000):
        with Session(engine) as session:
            queue.enqueue_many(session, [noop(seq=s) for s in range(start, min(a.n, start + 1000))], ids_only=True)
            session.commit()
    engine.dispose()
    conn = psycopg2.connect(dsn)
    conn.autocommit = True
    cur = conn.cursor()
    cur.execute("VACUUM ANALYZE")
    cur.execute("CHECKPOINT")
    cur.execute("SELECT pg_stat_statements_reset()")
    cur.execute("SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()")
    commits_before = cur.fetchone()[0]
    ctx = mp.get_context("fork")
    out = ctx.Queue()
    gate = tempfile.mkdtemp(prefix="scaling-")
    url = dsn.replace("postgresql://", "postgresql+psycopg2://")
    procs = [ctx.Process(target=_worker, args=(url, a.concurrency, a.batch_size, gate, i, out))
             for i in range(processes)]
    for p in procs:
        p.start()
    while len(list(Path(gate).glob("ready-*"))) < processes:
        time.sleep(0.005)
    spies = []
    if spy_dir is not None:
        py_spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
        for i, p in enumerate(procs):
            spies.append(subprocess.Popen([py_spy, "record", "--format", "raw", "--threads", "--gil", "--rate", "100",
                                           "-o", str(spy_dir / f"p{processes}-child{i}.txt"), "--pid", str(p.pid)],
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        time.sleep(1.0)  # py-spy attaches
    waits: collections.Counter[str] = collections.Counter()
    stop = threading.Event()
    sampler = threading.Thread(target=_sample_waits, args=(dsn, stop, waits))
    sampler.start()
    pg_before, busy_before = pg_cpu_seconds(postmaster), machine_busy()
    t0 = time.perf_counter()
    Path(gate, "go").touch()
    results = [out.get(timeout=600) for _ in procs]
    elapsed = time.perf_counter() - t0
    pg_used, busy_after = pg_cpu_seconds(postmaster) - pg_before, machine_busy()
    stop.set()
    sampler.join()
    for p in procs:
        p.join(60)
    for spy in spies:
        spy.wait(60)
    cur.execute("SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()")
    commits = cur.fetchone()[0] - commits_before
    cur.execute(STATS)
    statements = {row[0]: {"calls": row[1], "rows": row[2], "exec_ms": row[3], "plan_ms": row[4]}
                  for row in cur.fetchall()}
    cur.execute(f"SELECT count(*) FROM {PREFIX}_jobs WHERE status <> 'completed'")
    left = cur.fetchone()[0]
    cur.execute(f"TRUNCATE {PREFIX}_jobs CASCADE")
    conn.close()
    jobs = sum(r["jobs"] for r in results)
    return {"processes": processes, "jobs": jobs, "left": left, "seconds": elapsed, "rate": jobs / elapsed,
            "cpu_us_per_job": 1e6 * sum(r["cpu"] for r in results) / max(1, jobs),
            "pg_cpu_us_per_job": 1e6 * pg_used / max(1, jobs),
            "machine_busy": (busy_after[0] - busy_before[0]) / max(1, busy_after[1] - busy_before[1]),
            "per_child": [r["jobs"] for r in sorted(results, key=lambda r: r["index"])],
            "commits": commits, "statements": statements, "waits": dict(waits.most_common(8)),
            "wait_samples": sum(waits.values())}


def _report(rounds: list[dict[str, Any]]) -> str:
    lines = ["| processes | jobs/s | CPU µs/job (workers) | CPU µs/job (PostgreSQL) | machine busy | claims | "
             "rows/claim | claim ms (exec+plan) | "
             "outcome batches | rows/batch | batch ms | commits/job | busy backends (mean) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    by: dict[int, list[dict[str, Any]]] = collections.defaultdict(list)
    for r in rounds:
        by[r["processes"]].append(r)

    def med(values: list[float]) -> float:
        return statistics.median(values) if values else float("nan")

    for processes, rs in sorted(by.items()):
        def stat(name: str, field: str, rs: list[dict[str, Any]] = rs) -> list[float]:
            return [r["statements"].get(name, {}).get(field, 0) for r in rs]

        claims, crows = stat("claim", "calls"), stat("claim", "rows")
        cms = [(e + p) / c if c else 0 for e, p, c in zip(stat("claim", "exec_ms"), stat("claim", "plan_ms"),
                                                           claims, strict=True)]
        batches, brows = stat("outcomes", "calls"), stat("outcomes", "rows")
        bms = [(e + p) / c if c else 0 for e, p, c in zip(stat("outcomes", "exec_ms"), stat("outcomes", "plan_ms"),
                                                           batches, strict=True)]
        busy = [r["wait_samples"] / max(1, r["seconds"] * 100) for r in rs]
        lines.append(
            f"| {processes} | {med([r['rate'] for r in rs]):,.0f} | {med([r['cpu_us_per_job'] for r in rs]):.0f} | "
            f"{med([r['pg_cpu_us_per_job'] for r in rs]):.0f} | {100 * med([r['machine_busy'] for r in rs]):.0f} % | "
            f"{med(claims):,.0f} | {med([r / c if c else 0 for r, c in zip(crows, claims, strict=True)]):.1f} | "
            f"{med(cms):.2f} | {med(batches):,.0f} | "
            f"{med([r / c if c else 0 for r, c in zip(brows, batches, strict=True)]):.1f} | {med(bms):.2f} | "
            f"{med([r['commits'] / max(1, r['jobs']) for r in rs]):.3f} | {med(busy):.2f} |")
    lines.append("")
    for r in rounds:
        total = max(1, r["wait_samples"])
        mix = ", ".join(f"{k} {100 * v / total:.0f} %" for k, v in r["waits"].items())
        lines.append(f"- p{r['processes']}: {r['rate']:,.0f} jobs/s, per child {r['per_child']}, left {r['left']}; "
                     f"backend states: {mix}")
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--processes", default="1,2")
    p.add_argument("--n", type=int, default=20000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--concurrency", type=int, default=100)
    p.add_argument("--batch-size", type=int, default=100)
    p.add_argument("--py-spy", action="store_true", help="profile each child with py-spy (GIL samples)")
    p.add_argument("--out", type=Path, default=BENCH_DIR / "results" / ("scaling-" + time.strftime("%Y%m%d-%H%M%S")))
    a = p.parse_args(argv)
    a.out.mkdir(parents=True, exist_ok=True)
    sys.path.insert(0, str(BENCH_DIR))
    import psycopg2
    import sqlalchemy as sa
    from run import PG_SETTINGS

    import alembic_venturi
    from venturi_sa.devtools.throwaway import ThrowawayCluster

    settings = {**PG_SETTINGS, "shared_preload_libraries": "pg_stat_statements", "pg_stat_statements.track": "all",
                "pg_stat_statements.track_planning": "on",
                "track_activities": "on"}
    cluster = ThrowawayCluster(settings).start()
    dsn = f"postgresql://postgres@127.0.0.1:{cluster.port}/scaling"
    rounds: list[dict[str, Any]] = []
    try:
        admin = psycopg2.connect(f"postgresql://postgres@127.0.0.1:{cluster.port}/postgres")
        admin.autocommit = True
        admin.cursor().execute("CREATE DATABASE scaling")
        engine = sa.create_engine(dsn.replace("postgresql://", "postgresql+psycopg2://"))
        alembic_venturi.upgrade(engine, PREFIX)
        with engine.begin() as conn:
            conn.execute(sa.text("CREATE EXTENSION pg_stat_statements"))
        engine.dispose()
        postmaster = int((Path(cluster.data_dir) / "postmaster.pid").read_text().split()[0])
        counts = [int(k) for k in a.processes.split(",")]
        for r in range(a.rounds):
            for processes in counts if r % 2 == 0 else counts[::-1]:
                spy = a.out if a.py_spy else None
                got = _round(dsn, postmaster, processes, a, spy)
                rounds.append(got)
                print(f"round {r + 1} p{processes}: {got['rate']:,.0f} jobs/s, {got['cpu_us_per_job']:.0f} µs CPU/job "
                      f"+ PostgreSQL {got['pg_cpu_us_per_job']:.0f}, machine busy {100 * got['machine_busy']:.0f} %, "
                      f"claims {got['statements'].get('claim', {}).get('calls')}, load {os.getloadavg()[0]:.1f}",
                      flush=True)
        text = _report(rounds)
        if a.py_spy:
            from profile_drain import summarize

            for f in sorted(a.out.glob("p*-child*.txt")):
                text += f"\n## {f.stem}\n\n" + summarize(f, top=15)
        (a.out / "scaling.md").write_text(text)
        (a.out / "scaling.json").write_text(json.dumps(rounds, indent=1))
        print(text)
        admin.close()
    finally:
        cluster.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
