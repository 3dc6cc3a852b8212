#!/usr/bin/env python
"""The machine's wake-up floor: a NOTIFY heard by a waiting connection, then one claim round trip.

    bench/.venv/bin/python bench/floor.py                      # 3 rounds x 200 wake-ups, own throwaway cluster
    bench/.venv/bin/python bench/floor.py --port 5432 --rounds 1 --n 100

What no queue woken by LISTEN/NOTIFY can beat on this machine and cluster,
measured the way the harness's latency phase measures a worker.  A
receiver process (psycopg2, venturi_sa's driver) waits in ``select()`` on
a LISTEN connection; on each notification it runs venturi's claim
statement (``storage/claim.py``'s ``claim_statement``, for the default
worker's parameters: the queue's one kind, ``limit`` 10, the default
lease), compiled once, on a second, autocommit connection: one round trip,
its own transaction (with the claim's relaxed commit), no ``BEGIN``/``COMMIT``
pair, no pool, no SQLAlchemy, no threads.  The sender enqueues one job per
session and commit with ``queue.enqueue`` (whose ``INSERT`` sends the
NOTIFY) every ``--spacing`` seconds, as the harness's ``latency_enqueue``
does.  A sample is the claim's return minus the enqueuer's commit return
(``time.monotonic``, system-wide on Linux), split at the ``select()``
return into delivery and claim.  ``bench/run.py`` runs :func:`measure`
once per repeat in its latency phase; venturi's p50 target is within 1.5x
of this p50.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
PREFIX = "flr"
LIMIT = 10  # the default Worker's claim limit: min(concurrency 10, batch_size 100)


def claim_sql(dsn: str, prefix: str) -> tuple[str, Any]:
    """venturi's claim statement for a default worker of one kind (``noop``): the text and parameters
    SQLAlchemy hands psycopg2 (caught from one execution on ``dsn``, rolled back)."""
    from datetime import timedelta

    import sqlalchemy as sa

    import venturi_sa
    from venturi_sa.storage.claim import claim_statement
    from venturi_sa.storage.params import ClaimParams
    from venturi_sa.worker.producer import DEFAULT_LEASE

    models = venturi_sa.make_models(prefix)
    params = ClaimParams(worker_id="floor:1", kinds=["noop"], limit=LIMIT, leases={"noop": timedelta(seconds=60)},
                         default_lease=DEFAULT_LEASE, caps={})
    sent: list[tuple[str, Any]] = []
    engine = sa.create_engine(sa.make_url(dsn).set(drivername="postgresql+psycopg2"))

    @sa.event.listens_for(engine, "before_cursor_execute")
    def caught(conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, executemany: bool) -> None:
        sent.append((statement, parameters))

    try:
        with engine.connect() as conn:
            conn.execute(claim_statement(models, params), {"limit": LIMIT, "worker_id": params.worker_id})
            conn.rollback()
    finally:
        engine.dispose()
    return sent[-1]


def _receiver(dsn: str, channel: str, n: int) -> None:
    """Child: LISTEN, and on each notification claim; prints READY, then each job's times as JSON."""
    import psycopg2

    sql, params = claim_sql(dsn, PREFIX)
    listen = psycopg2.connect(dsn)
    listen.autocommit = True
    listen.cursor().execute(f'LISTEN "{channel}"')  # a validated prefix's channel name
    claimer = psycopg2.connect(dsn)
    claimer.autocommit = True
    cur = claimer.cursor()
    cur.execute(sql, params)  # warm: the connection's first statement (claims nothing)
    cur.fetchall()
    print("READY", flush=True)
    heard: dict[int, float] = {}
    claimed: dict[int, float] = {}
    deadline = time.monotonic() + 60 + n
    while len(claimed) < n + 1 and time.monotonic() < deadline:
        if not listen.notifies:
            if not select.select([listen], [], [], 1.0)[0]:
                continue
            listen.poll()
        t_heard = time.monotonic()
        listen.notifies.clear()
        cur.execute(sql, params)
        rows = cur.fetchall()
        t_claimed = time.monotonic()
        for row in rows:
            seq = int(row[2]["seq"])  # RETURNING id, kind, payload, ...
            heard[seq], claimed[seq] = t_heard, t_claimed
    print(json.dumps({"heard": heard, "claimed": claimed}), flush=True)


def _pct(values: list[float], q: float) -> float:
    """Nearest-rank percentile (``q`` in 0..1), as the harness computes the systems' p50/p99."""
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, int(round(q * len(ordered) + 0.5)) - 1))]


def measure(dsn: str, n: int = 200, spacing: float = 0.02) -> dict[str, Any]:
    """One floor measurement on ``dsn`` (a SQLAlchemy psycopg2 URL of a database migrated for ``flr``).

    Returns p50/p95/p99/max/min of the samples in ms, the medians of their
    delivery and claim parts, and how many of the ``n`` wake-ups arrived.
    """
    import sqlalchemy as sa
    from ab_kit import noop_queue
    from sqlalchemy.orm import Session

    from venturi_sa.prefix import Names

    queue, noop = noop_queue(PREFIX)
    url = sa.make_url(dsn).set(drivername="postgresql+psycopg2")
    plain = url.render_as_string(hide_password=False).replace("postgresql+psycopg2://", "postgresql://", 1)
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1",
           "PYTHONPATH": os.pathsep.join([str(BENCH_DIR), *filter(None, [os.environ.get("PYTHONPATH")])])}
    proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "_receiver", plain,
                             Names(PREFIX).channel, str(n)],
                            stdout=subprocess.PIPE, text=True, env=env)
    assert proc.stdout is not None
    engine = sa.create_engine(url)
    try:
        line = proc.stdout.readline().strip()
        if line != "READY":
            raise RuntimeError(f"the floor receiver did not start: {line!r}")

        def one(seq: int) -> None:
            with Session(engine) as session:
                queue.enqueue(session, noop(seq=seq))
                session.commit()

        one(-1)  # warm the enqueuer's connection; not counted
        time.sleep(0.2)
        commits: dict[int, float] = {}
        t0 = time.monotonic() + 0.2
        for seq in range(n):
            delay = t0 + seq * spacing - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            one(seq)
            commits[seq] = time.monotonic()
        out, _ = proc.communicate(timeout=120)
    finally:
        engine.dispose()
        if proc.poll() is None:
            proc.kill()
    got = json.loads([ln for ln in out.splitlines() if ln.startswith("{")][-1])
    heard = {int(s): t for s, t in got["heard"].items()}
    claimed = {int(s): t for s, t in got["claimed"].items()}
    seqs = [s for s in range(n) if s in claimed]
    total = [1e3 * (claimed[s] - commits[s]) for s in seqs]
    if not total:
        raise RuntimeError("the floor receiver heard no wake-up")
    return {"p50": _pct(total, 0.5), "p95": _pct(total, 0.95), "p99": _pct(total, 0.99), "max": max(total),
            "min": min(total), "delivery": statistics.median(1e3 * (heard[s] - commits[s]) for s in seqs),
            "claim": statistics.median(1e3 * (claimed[s] - heard[s]) for s in seqs),
            "received": len(seqs), "n": n}


def prepare(admin_dsn: str, database: str) -> str:
    """``database`` dropped, created and migrated for the floor's prefix on ``admin_dsn``'s server; its URL."""
    import psycopg2
    import sqlalchemy as sa

    import alembic_venturi

    admin = psycopg2.connect(admin_dsn)
    admin.autocommit = True
    try:
        admin.cursor().execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
        admin.cursor().execute(f'CREATE DATABASE "{database}"')
    finally:
        admin.close()
    url = sa.make_url(admin_dsn).set(drivername="postgresql+psycopg2", database=database)
    engine = sa.create_engine(url)
    try:
        alembic_venturi.upgrade(engine, PREFIX)
    finally:
        engine.dispose()
    return url.render_as_string(hide_password=False)


def main(argv: list[str]) -> int:
    if argv[:1] == ["_receiver"]:
        _receiver(argv[1], argv[2], int(argv[3]))
        return 0
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=200, help="wake-ups per round (the harness's n_latency)")
    p.add_argument("--spacing", type=float, default=0.02, help="seconds between enqueues (the harness's 0.02)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--port", type=int, help="an existing superuser/trust server on 127.0.0.1")
    a = p.parse_args(argv)
    sys.path.insert(0, str(BENCH_DIR))
    from ab_kit import load, server

    with server(a.port) as port:
        dsn = prepare(f"postgresql://postgres@127.0.0.1:{port}/postgres", "floor")
        results = []
        print(f"{load()}; {a.n} wake-ups every {a.spacing * 1e3:.0f} ms", flush=True)
        for r in range(a.rounds):
            res = measure(dsn, a.n, a.spacing)
            results.append(res)
            print(f"round {r + 1}: p50 {res['p50']:.2f} ms, p99 {res['p99']:.2f} ms, max {res['max']:.2f} "
                  f"(delivery {res['delivery']:.2f}, claim {res['claim']:.2f}; {res['received']}/{a.n}); {load()}",
                  flush=True)
        print(f"floor: p50 {statistics.median(x['p50'] for x in results):.2f} ms, "
              f"p99 {statistics.median(x['p99'] for x in results):.2f} ms, "
              f"delivery {statistics.median(x['delivery'] for x in results):.2f}, "
              f"claim {statistics.median(x['claim'] for x in results):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
