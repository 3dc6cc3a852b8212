#!/usr/bin/env python
"""Where a bulk enqueue's time goes, per system: client CPU, server CPU, WAL, and the client's top functions.

    bench/.venv/bin/python bench/enqueue_cost.py                       # venturi_sa, pgqueuer, raw_psycopg2
    bench/.venv/bin/python bench/enqueue_cost.py --rounds 5 --n 50000 --profile

The harness's ``enqueue_bulk`` (each system's own adapter: ``--n`` jobs in
chunks of 1,000, one transaction each), on one durable throwaway cluster
(``bench/run.py``'s settings; or ``--port``), the systems alternating in a
new order each round, each in a fresh database, in this process.  Per run:
jobs/s; the client's CPU µs per job (this process's user + system time: the
library and its driver); the server's CPU µs per job (the user + system time
of the database's server processes, from ``/proc``: parsing, planning,
inserting, index maintenance, commit); and the WAL bytes per job.  Medians
over rounds, and each system's same-round ratio to the first.  With
``--profile``, a last round runs each system's enqueue under cProfile and
prints its top functions by own time, so client costs can be compared
function by function.  Needs the shared harness (``bench/run.py --harness``'s
default, or ``$PEERBENCH_HOME``).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent


def _server_cpu(cur: Any, database: str) -> float:
    """User + system CPU seconds so far of the server processes connected to ``database``."""
    cur.execute("SELECT pid FROM pg_stat_activity WHERE datname = %s", (database,))
    total = 0.0
    for (pid,) in cur.fetchall():
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except FileNotFoundError:
            continue
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def one(runner: Any, system: str, n: int, r: int, profile: bool = False) -> dict[str, Any]:
    """``n`` jobs enqueued in chunks of 1,000 by ``system``'s adapter in a fresh database; the costs per job."""
    import psycopg2
    from peerbench import registry

    adapter = registry.load(system)
    database = f"pb_{system}_enqcost_{r}"
    dsn = runner.fresh_db(database)
    try:
        adapter.setup(dsn)
        runner.settle(dsn, vacuum=False)
        admin = psycopg2.connect(dsn)
        admin.autocommit = True
        cur = admin.cursor()
        prof = cProfile.Profile() if profile else None
        with adapter.open_enqueuer(dsn) as enq:
            enq.enqueue_bulk([-1])  # connect (and warm) before the clock starts
            cur.execute("SELECT pg_current_wal_insert_lsn()")
            lsn0 = cur.fetchone()[0]
            server0, client0 = _server_cpu(cur, database), time.process_time()
            t0 = time.perf_counter()
            if prof is not None:
                prof.enable()
            for start in range(0, n, 1000):
                enq.enqueue_bulk(list(range(start, min(n, start + 1000))))
            if prof is not None:
                prof.disable()
            elapsed = time.perf_counter() - t0
            client = time.process_time() - client0
            server = _server_cpu(cur, database) - server0  # before close: the enqueuer's process is counted
        cur.execute("SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), %s)", (lsn0,))
        wal = float(cur.fetchone()[0])
        admin.close()
    finally:
        runner.drop_db(database)
    out = {"rate": n / elapsed, "client_us": 1e6 * client / n, "server_us": 1e6 * server / n, "wal": wal / n}
    if prof is not None:
        text = io.StringIO()
        pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(18)
        out["profile"] = text.getvalue()
    return out


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--systems", default="venturi_sa,pgqueuer,raw_psycopg2", help="the first is the reference")
    p.add_argument("--n", type=int, default=50_000, help="jobs per run (the harness's n_bulk)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--profile", action="store_true", help="then one cProfile round per system")
    p.add_argument("--port", type=int, help="an existing superuser/trust server on 127.0.0.1")
    p.add_argument("--harness", help="peerbench dir (default $PEERBENCH_HOME or <repo>/../shared/bench)")
    a = p.parse_args(argv)
    sys.path.insert(0, str(BENCH_DIR))
    import run
    from ab_kit import load, server

    run.load_harness(run.find_harness(a.harness))
    from peerbench import orchestrator

    systems = a.systems.split(",")
    got: dict[str, list[dict[str, Any]]] = {s: [] for s in systems}
    with server(a.port) as port:
        cfg = orchestrator.Config(port=port, systems=tuple(systems), out_dir=Path("/tmp") / "venturi-enqueue-cost")
        runner = orchestrator.Runner(cfg)
        print(f"{load()}; {a.n:,} jobs per run in chunks of 1,000", flush=True)
        for r in range(a.rounds):
            order = list(systems)
            random.Random(r).shuffle(order)
            for system in order:
                got[system].append(one(runner, system, a.n, r))
            print(f"round {r + 1}: " + ", ".join(
                f"{s} {got[s][-1]['rate']:,.0f}/s (client {got[s][-1]['client_us']:.1f} µs, server "
                f"{got[s][-1]['server_us']:.1f} µs, WAL {got[s][-1]['wal']:.0f} B)" for s in systems)
                + f"; {load()}", flush=True)
        ref = systems[0]
        print("\n| system | jobs/s | ÷ " + ref + " | client CPU µs/job | server CPU µs/job | WAL bytes/job |")
        print("|---|---|---|---|---|---|")
        for s in systems:
            ratio = statistics.median(x["rate"] / y["rate"] for x, y in zip(got[s], got[ref], strict=True))
            print(f"| {s} | {statistics.median(x['rate'] for x in got[s]):,.0f} | {ratio:.2f} | "
                  f"{statistics.median(x['client_us'] for x in got[s]):.1f} | "
                  f"{statistics.median(x['server_us'] for x in got[s]):.1f} | "
                  f"{statistics.median(x['wal'] for x in got[s]):.0f} |")
        if a.profile:
            for s in systems:
                res = one(runner, s, a.n, a.rounds, profile=True)
                print(f"\n### {s}: cProfile of the enqueue loop ({res['rate']:,.0f}/s under the profiler)\n")
                print("```\n" + res["profile"].strip() + "\n```")
        print(load())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
