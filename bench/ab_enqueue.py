#!/usr/bin/env python
"""Same-run A/B of venturi's enqueue paths, against plain SQL and plain ORM on the same table.

    bench/.venv/bin/python bench/ab_enqueue.py --trees old=/path/to/old/checkout,new=. --rounds 5
    bench/.venv/bin/python bench/ab_enqueue.py --trees new=. --variants one,orm_one --n-one 2000

On one throwaway durable cluster (``bench/run.py``'s settings), each round runs
every variant once per tree (the raw and plain-ORM ones: the last tree only),
in a child process whose ``PYTHONPATH`` starts with that tree, after a
``TRUNCATE`` (so every variant inserts into the same empty indexes).  Variants:

* ``many``: ``queue.enqueue_many(session, tasks)`` + commit, chunks of ``--chunk``;
* ``ids``: the same with ``ids_only=True`` (trees without it are skipped);
* ``raw_insert``: psycopg2 runs venturi's own bulk ``INSERT ... SELECT`` text with
  its parameters built before the clock starts (the server's share: the limit of this schema);
* ``raw_values``: psycopg2 ``execute_values`` of the rows into the same table
  (what the shared harness's raw_psycopg2 does, on venturi's schema);
* ``one``: ``Session`` + ``queue.enqueue`` + commit per job (``--n-one`` jobs);
* ``one_nonotify``: the same with ``Queue(..., notify=False)``;
* ``orm_one``: ``Session`` + ``session.add`` of a plain mapped row into the
  same table (no venturi) + commit per job.

Prints jobs/s and the child's CPU µs per job per round, then medians and
each variant's median per-round ratio to the same variant on the first tree
(the raw and plain-ORM ones: to the first variant).  Only same-round
ratios mean anything on a shared machine; note ``uptime`` beside them.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
PREFIX = "abq"
BULK = ("many", "ids", "raw_insert", "raw_values")


def _queue(notify: bool = True) -> Any:
    from marshmallow import Schema, fields

    import venturi_sa

    class NoopPayload(Schema):
        seq = fields.Integer(required=True)

    queue = venturi_sa.Queue(venturi_sa.make_models(PREFIX), notify=notify)

    @queue.task("noop", payload=NoopPayload)
    def noop(payload: Any, ctx: Any) -> None:
        return None

    return queue, noop


def _chunks(n: int, size: int) -> list[range]:
    return [range(s, min(n, s + size)) for s in range(0, n, size)]


def _bulk(dsn: str, variant: str, n: int, chunk: int) -> None:
    import sqlalchemy as sa
    from sqlalchemy.orm import Session

    queue, noop = _queue()
    engine = sa.create_engine(dsn)
    with engine.connect():
        pass
    if variant in ("raw_insert", "raw_values"):
        import psycopg2.extras

        from venturi_sa.models import new_job_ids

        conn = engine.raw_connection()
        cur = conn.cursor()
        if variant == "raw_insert":
            from venturi_sa.storage.enqueue import InsertParams, NewJobColumns, _insert, _values

            compiled = _insert(queue.models).compile(dialect=engine.dialect)
            chunks = []
            for r in _chunks(n, chunk):
                rows = NewJobColumns(ids=new_job_ids(len(r)), kinds=["noop"] * len(r),
                                     payloads=[{"seq": s} for s in r], priorities=[1] * len(r),
                                     dedup_keys=[None] * len(r))
                _, [params] = _values(InsertParams(jobs=rows, notify_channel=queue.models.names.channel))
                chunks.append(compiled.construct_params({**params, "run_count": 0, "failure_count": 0}))
            start()
            for params in chunks:
                cur.execute(compiled.string, params)
                conn.commit()
        else:
            start()
            for r in _chunks(n, chunk):
                psycopg2.extras.execute_values(
                    cur, f"INSERT INTO {PREFIX}_jobs (id, kind, payload, priority, status, created_at, visible_at) "
                         "VALUES %s",
                    [(i, "noop", json.dumps({"seq": s}), 1) for i, s in zip(new_job_ids(len(r)), r, strict=True)],
                    template="(%s, %s, %s::jsonb, %s, 'pending', now(), now())", page_size=chunk)
                cur.execute("SELECT pg_notify(%s, 'noop')", (queue.models.names.channel,))
                conn.commit()
        conn.close()
    else:
        start()
        for r in _chunks(n, chunk):
            with Session(engine) as session:
                tasks = [noop(seq=s) for s in r]
                if variant == "ids":
                    queue.enqueue_many(session, tasks, ids_only=True)
                else:
                    queue.enqueue_many(session, tasks)
                session.commit()
    finish(n)
    engine.dispose()


def _one(dsn: str, variant: str, n: int) -> None:
    import sqlalchemy as sa
    from sqlalchemy.orm import DeclarativeBase, Session

    queue, noop = _queue(notify=variant != "one_nonotify")
    engine = sa.create_engine(dsn)
    with engine.connect():
        pass
    if variant == "orm_one":
        class Base(DeclarativeBase):
            pass

        class PlainRow(Base):
            __table__ = sa.Table(f"{PREFIX}_jobs", Base.metadata, autoload_with=engine)

        now = sa.func.now()
        start()
        for s in range(n):
            with Session(engine) as session:
                session.add(PlainRow(id=str(uuid.uuid4()), kind="noop", payload={"seq": s}, priority=1,
                                     status="pending", created_at=now, visible_at=now))
                session.commit()
    else:
        start()
        for s in range(n):
            with Session(engine) as session:
                queue.enqueue(session, noop(seq=s))
                session.commit()
    finish(n)
    engine.dispose()


_T0: list[float] = []


def start() -> None:
    _T0[:] = [time.perf_counter(), *_cpu()]


def _cpu() -> tuple[float]:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return (r.ru_utime + r.ru_stime,)


def finish(n: int) -> None:
    elapsed = time.perf_counter() - _T0[0]
    cpu = _cpu()[0] - _T0[1]
    print(json.dumps({"jobs": n, "seconds": elapsed, "cpu_us": 1e6 * cpu / n}), flush=True)


def _run_child(dsn: str, tree: Path, variant: str, n: int, chunk: int) -> dict[str, float] | None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tree), str(BENCH_DIR)]), "PYTHONDONTWRITEBYTECODE": "1"}
    res = subprocess.run([sys.executable, str(Path(__file__).resolve()), "_child", dsn, variant, str(n), str(chunk)],
                         capture_output=True, text=True, env=env)
    lines = [ln for ln in res.stdout.splitlines() if ln.startswith("{")]
    if res.returncode != 0 or not lines:
        tail = res.stderr.strip().splitlines()[-1:] or ["no output"]
        print(f"  {variant} @ {tree}: failed ({tail[0]})", flush=True)
        return None
    return json.loads(lines[-1])  # type: ignore[no-any-return]


def main(argv: list[str]) -> int:
    if argv[:1] == ["_child"]:
        dsn, variant, n, chunk = argv[1], argv[2], int(argv[3]), int(argv[4])
        (_bulk(dsn, variant, n, chunk) if variant in BULK else _one(dsn, variant, n))
        return 0
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--trees", default="new=.", help="name=path,... (venturi checkouts); first is the reference")
    p.add_argument("--variants", default="many,ids,raw_insert,raw_values")
    p.add_argument("--n", type=int, default=20000, help="jobs per bulk variant and round")
    p.add_argument("--n-one", type=int, default=1000, help="jobs per one-per-transaction variant and round")
    p.add_argument("--chunk", type=int, default=1000)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--port", type=int, help="an existing superuser/trust server on 127.0.0.1")
    a = p.parse_args(argv)
    sys.path.insert(0, str(BENCH_DIR))
    import sqlalchemy as sa
    from ab_kit import fresh_database, release

    trees = [(name, Path(path).resolve()) for name, path in (t.split("=", 1) for t in a.trees.split(","))]
    variants = a.variants.split(",")
    cluster, dsn, admin = fresh_database(a.port, "ab_enqueue", PREFIX)
    engine = sa.create_engine(dsn)
    cases = [(v, name, tree) for v in variants for name, tree in trees
             if v in ("many", "ids", "one", "one_nonotify") or name == trees[-1][0]]
    rates: dict[str, list[float | None]] = {f"{v}@{name}": [] for v, name, _ in cases}
    cpus: dict[str, list[float]] = {k: [] for k in rates}
    try:
        for r in range(a.rounds):
            order = cases if r % 2 == 0 else cases[::-1]
            for variant, name, tree in order:
                with engine.begin() as conn:
                    conn.execute(sa.text(f"TRUNCATE {PREFIX}_jobs CASCADE"))
                n = a.n if variant in BULK else a.n_one
                out = _run_child(dsn, tree, variant, n, a.chunk)
                key = f"{variant}@{name}"
                rates[key].append(None if out is None else out["jobs"] / out["seconds"])
                if out is not None:
                    cpus[key].append(out["cpu_us"])
                    print(f"round {r + 1} {key}: {rates[key][-1]:,.0f} jobs/s, {out['cpu_us']:.1f} µs CPU/job "
                          f"(load {os.getloadavg()[0]:.1f})", flush=True)
        print(f"\nmedians over {a.rounds} rounds; ratio = median of per-round ratios to the same variant "
              f"on the first tree ({trees[0][0]}), or to the first variant ({next(iter(rates))}) for the others")
        for key, values in rates.items():
            got = [v for v in values if v is not None]
            if not got:
                continue
            same = f"{key.split('@')[0]}@{trees[0][0]}"
            ref = same if same in rates else next(iter(rates))
            ratios = [v / b for v, b in zip(values, rates[ref], strict=True) if v is not None and b]
            print(f"| {key} | {statistics.median(got):,.0f} jobs/s | {statistics.median(cpus[key]):.1f} µs CPU/job | "
                  f"{statistics.median(ratios):.2f}× |")
    finally:
        engine.dispose()
        release(cluster, admin)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
