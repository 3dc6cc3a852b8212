#!/usr/bin/env python
"""The statements a worker sends per drained job, by statement, for each of several source trees.

    bench/.venv/bin/python bench/statement_count.py --trees main=/tmp/base-main,new=. --n 2000
    bench/.venv/bin/python bench/statement_count.py --trees main=/tmp/base-main,new=. --idle-keyed

On one throwaway durable cluster, for each tree (in a child process whose
``PYTHONPATH`` starts with it): enqueue ``--n`` no-op jobs, drain them with
``Worker.run_until_idle()`` (``listen=False``, concurrency 10) and count
every statement the worker's engine sends (``before_cursor_execute``),
grouped by its first words, with the mean time each took to execute (the
driver's ``execute``: round trip and server).  The counts do not depend on
the machine's load; the times do.  ``--idle-keyed``: the queue also registers
``ab_drain.py``'s keyed kind, with no job.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
PREFIX = "ab"


def _shape(statement: str) -> str:
    """A statement's first words, without CTE bodies' details: what it is, not its parameters."""
    flat = re.sub(r"\s+", " ", statement).strip()
    if flat.startswith("WITH "):
        names = re.findall(r"(?:WITH|,) (?:RECURSIVE )?(\w+) AS", flat)
        main = flat.rsplit(")", 1)[-1].strip()[:40]
        return f"WITH {','.join(names[:4])}{'...' if len(names) > 4 else ''} {main}"
    return flat[:60]


def _child(dsn: str, n: int, idle_keyed: bool) -> None:
    import sqlalchemy as sa
    from sqlalchemy.orm import Session

    import venturi_sa

    os.environ["AB_DRAIN_IDLE_KEYED"] = "1" if idle_keyed else ""
    from ab_drain import _queue

    queue, noop = _queue()
    engine = sa.create_engine(dsn)
    with Session(engine) as session:
        queue.enqueue_many(session, [noop(seq=i) for i in range(n)])
        session.commit()
    worker_engine = sa.create_engine(dsn, pool_size=15, max_overflow=10)
    counts: collections.Counter[str] = collections.Counter()
    spent: collections.Counter[str] = collections.Counter()

    @sa.event.listens_for(worker_engine, "before_cursor_execute")
    def count(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        counts[_shape(statement)] += 1
        conn.info["venturi_bench_t0"] = time.perf_counter()

    @sa.event.listens_for(worker_engine, "after_cursor_execute")
    def took(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        spent[_shape(statement)] += time.perf_counter() - conn.info.pop("venturi_bench_t0", time.perf_counter())

    worker = venturi_sa.Worker(queue, worker_engine, concurrency=10, listen=False)
    done = worker.run_until_idle()
    worker_engine.dispose()
    engine.dispose()
    print(json.dumps({"jobs": done, "counts": dict(counts), "spent": dict(spent), "tree": venturi_sa.__file__}),
          flush=True)


def main(argv: list[str]) -> int:
    if argv[:1] == ["_child"]:
        _child(argv[1], int(argv[2]), argv[3] == "1")
        return 0
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--trees", default="new=.", help="name=path,... (venturi checkouts)")
    p.add_argument("--n", type=int, default=2000)
    p.add_argument("--idle-keyed", action="store_true")
    p.add_argument("--port", type=int, help="an existing superuser/trust server on 127.0.0.1")
    a = p.parse_args(argv)
    sys.path.insert(0, str(BENCH_DIR))
    from ab_kit import fresh_database, release

    cluster, dsn, admin = fresh_database(a.port, "statement_count", PREFIX)
    try:
        for name, path in (t.split("=", 1) for t in a.trees.split(",")):
            tree = Path(path).resolve()
            env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tree), str(BENCH_DIR)]),
                   "PYTHONDONTWRITEBYTECODE": "1"}
            res = subprocess.run([sys.executable, str(Path(__file__).resolve()), "_child", dsn, str(a.n),
                                  "1" if a.idle_keyed else "0"], capture_output=True, text=True, env=env, check=True)
            out = json.loads([ln for ln in res.stdout.splitlines() if ln.startswith("{")][-1])
            jobs = max(1, out["jobs"])
            print(f"{name} ({out['tree']}): {out['jobs']} jobs, {sum(out['counts'].values()) / jobs:.3f} "
                  "statements per job")
            for shape, c in sorted(out["counts"].items(), key=lambda kv: -kv[1]):
                print(f"  {c:7d}  {c / jobs:7.3f}/job  {1e6 * out['spent'][shape] / c:8.0f} µs each  {shape}")
    finally:
        release(cluster, admin)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
