#!/usr/bin/env python
"""In-process A/B of venturi's worker: two source trees drain the same jobs, alternating.

    bench/.venv/bin/python bench/ab_drain.py --a /tmp/venturi-base --b . --rounds 5
    bench/.venv/bin/python bench/ab_drain.py --a . --b . --processes 1,2,4 --supervised  # the supervisor
    bench/.venv/bin/python bench/ab_drain.py --a OLD --b . --drivers psycopg2,psycopg,asyncpg,psycopg_async
    bench/.venv/bin/python bench/ab_drain.py --a . --b . --schedules 50        # what firing costs the claims
    bench/.venv/bin/python bench/ab_drain.py --a . --b . --idle-keyed b        # what an idle keyed kind costs

On one throwaway durable cluster, each round enqueues ``--n`` no-op jobs
(``enqueue_many``, chunks of 1,000) and vacuums and analyzes the jobs and
journal tables, then drains them with
``Worker.run_until_idle()`` (``listen=False``) in a child process whose
``PYTHONPATH`` starts with tree A, then the same with tree B.  Prints per
round jobs/s and the child's CPU time per job (``getrusage``), then the
medians and the B ÷ A ratio of the medians.  Only the ratio means anything
on a shared machine: both trees see the same load within a round.
``--drivers`` runs every variant once per driver in each round (``asyncpg``
and ``psycopg_async``: a Worker on an ``AsyncEngine``) and adds each one's
ratio to the first driver's A.

``--schedules K``: both variants drain with ``Worker.run()`` (its firing
thread on, ``kinds=["noop"]``) until the round's jobs are done; B's queue
also declares K schedules of another kind (``tick``) firing every second, so
B's worker fires them while it claims, and A's fires nothing.  The fired
``tick`` jobs (which no variant claims) are deleted after each round.

``--idle-keyed b`` (or ``both``): B's queue (or both variants' queues) also
registers a keyed kind (``idle_keyed``: ``key_concurrency = 2``, a
``limit_key``) that has no job, so the worker's every claim takes the
limited claim's path for it; ``--idle-keyed both`` with different trees
compares what that costs in each.

Rounds alternate the order (AB, BA, AB, ...): the variant that drains second
in a round measured faster on this machine even with the same tree on both
sides, so an even number of rounds gives each variant each position equally.
Each line prints the load average.
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
from pathlib import Path
from typing import Any

from ab_kit import noop_queue

BENCH_DIR = Path(__file__).resolve().parent
PREFIX = "ab"


IDLE_KEYED = "AB_DRAIN_IDLE_KEYED"
"""Set (to ``1``) in a drain child's environment: its queue also registers the idle keyed kind."""


def _queue() -> Any:
    queue, noop = noop_queue(PREFIX)
    if os.environ.get(IDLE_KEYED) == "1":
        from marshmallow import Schema, fields

        import venturi_sa

        class IdleKeyed(venturi_sa.Task):
            KIND = "idle_keyed"
            key_concurrency = 2

            class Payload(Schema):
                tenant = fields.String(required=True)

            def limit_key(self) -> str:
                return str(self.payload["tenant"])

            def run(self, ctx: Any) -> None:
                return None

        queue.register(IdleKeyed)
    return queue, noop


ASYNC_DRIVERS = ("asyncpg", "psycopg_async")


def _engine(dsn: str, driver: str, **kwargs: Any) -> Any:
    """The worker's engine for ``dsn`` on ``driver``: an ``AsyncEngine`` for an async driver."""
    import sqlalchemy as sa

    url = sa.make_url(dsn).set(drivername=f"postgresql+{driver}")
    if driver in ASYNC_DRIVERS:
        from sqlalchemy.ext.asyncio import create_async_engine

        return create_async_engine(url, **kwargs)
    return sa.create_engine(url, **kwargs)


def _supervised(dsn: str, concurrency: int, batch_size: int, gate: str, index: int) -> None:
    """One supervised worker process: its own engine; says it is ready, waits for the gate, drains until idle."""
    import sqlalchemy as sa

    import venturi_sa

    queue, _ = _queue()
    engine = sa.create_engine(dsn, pool_size=concurrency + 5, max_overflow=10)
    worker = venturi_sa.Worker(queue, engine, concurrency=concurrency, batch_size=batch_size, listen=False)
    with engine.connect():
        pass
    Path(gate, f"ready-{index}").touch()
    while not Path(gate, "go").exists():
        time.sleep(0.005)
    worker.run_until_idle()
    engine.dispose()


def _child(dsn: str, concurrency: int, batch_size: int, processes: int, supervised: bool = False,
           driver: str = "psycopg2") -> None:
    import sqlalchemy as sa

    import venturi_sa

    queue, _ = _queue()
    if processes == 1 and not supervised:
        engine = _engine(dsn, driver, pool_size=concurrency + 5, max_overflow=10)
        worker = venturi_sa.Worker(queue, engine, concurrency=concurrency, batch_size=batch_size, listen=False)
        before = resource.getrusage(resource.RUSAGE_SELF)
        t0 = time.perf_counter()
        n = worker.run_until_idle()
        if isinstance(engine, sa.Engine):
            engine.dispose()  # an AsyncEngine's connections were closed by the worker, on its loop
    else:  # venturi worker --processes N: the supervisor, each child draining until idle
        import functools

        from venturi_sa.worker.supervisor import Supervisor

        count = sa.text(f"SELECT count(*) FROM {PREFIX}_jobs WHERE status = 'completed'")
        engine = sa.create_engine(dsn)
        with engine.connect() as conn:
            completed_before = conn.execute(count).scalar()
        engine.dispose()
        import tempfile
        import threading

        gate = tempfile.mkdtemp(prefix="ab_drain-")
        supervisor = threading.Thread(target=Supervisor(
            functools.partial(_supervised, dsn, concurrency, batch_size, gate), processes).run)
        supervisor.start()  # off the main thread: no signal handlers
        while len(list(Path(gate).glob("ready-*"))) < processes:
            time.sleep(0.005)
        before = resource.getrusage(resource.RUSAGE_SELF)
        t0 = time.perf_counter()
        Path(gate, "go").touch()
        supervisor.join()
        engine = sa.create_engine(dsn)
        with engine.connect() as conn:
            n = conn.execute(count).scalar() - completed_before
        engine.dispose()
    elapsed = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
           + kids.ru_utime + kids.ru_stime)
    print(json.dumps({"jobs": n, "seconds": elapsed, "cpu": cpu, "tree": venturi_sa.__file__}), flush=True)


def _firing_child(dsn: str, concurrency: int, batch_size: int, schedules: int) -> None:
    """``--schedules`` mode: ``Worker.run()`` on noop jobs, with ``schedules`` tick schedules firing each second."""
    import threading
    from datetime import timedelta

    import sqlalchemy as sa

    import venturi_sa

    queue, _ = _queue()
    if schedules:
        @queue.task("tick")
        def tick(payload: Any, ctx: Any) -> None:
            return None

        for i in range(schedules):
            queue.schedule(tick(), every=timedelta(seconds=1), name=f"tick-{i}")
    engine = sa.create_engine(dsn, pool_size=concurrency + 5, max_overflow=10)
    pending = sa.text(f"SELECT count(*) FROM {PREFIX}_jobs WHERE kind = 'noop' AND status = 'pending'")
    with engine.connect() as conn:
        n = conn.execute(pending).scalar_one()
    lock, done, counts = threading.Lock(), threading.Event(), {"finished": 0, "fired": 0}

    def on_event(name: str, data: dict[str, Any]) -> None:
        with lock:
            if name == "schedule_fired":
                counts["fired"] += data["count"]
            elif name == "finished" and data["kind"] == "noop":
                counts["finished"] += 1
                if counts["finished"] >= n:
                    done.set()

    worker = venturi_sa.Worker(queue, engine, kinds=["noop"], concurrency=concurrency, batch_size=batch_size,
                               listen=False, on_event=on_event)
    before = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.perf_counter()
    thread = threading.Thread(target=worker.run)
    thread.start()
    done.wait()
    elapsed = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_SELF)
    worker.stop()
    thread.join()
    engine.dispose()
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    print(json.dumps({"jobs": n, "seconds": elapsed, "cpu": cpu, "fired": counts["fired"],
                      "tree": venturi_sa.__file__}), flush=True)


def _enqueue_child(dsn: str, n: int) -> None:
    import sqlalchemy as sa
    from sqlalchemy.orm import Session

    queue, noop = _queue()
    engine = sa.create_engine(dsn)
    for start in range(0, n, 1000):
        with Session(engine) as session:
            queue.enqueue_many(session, [noop(seq=i) for i in range(start, min(n, start + 1000))])
            session.commit()
    engine.dispose()


def _enqueue(dsn: str, tree: Path, n: int) -> None:
    """Enqueue ``n`` jobs with ``tree``, then ``VACUUM ANALYZE`` the queue's tables.

    Every drain starts from a vacuumed, analyzed table: without this the first
    rounds ran on the planner's guesses for a young table until autovacuum
    came by, and the round it came by in measured up to 2.5× faster than the
    one before, whichever tree drained.
    """
    env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONDONTWRITEBYTECODE": "1"}
    subprocess.run([sys.executable, str(Path(__file__).resolve()), "_enqueue", dsn, str(n)], env=env, check=True)
    import sqlalchemy as sa

    engine = sa.create_engine(dsn, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        for table in ("jobs", "journal"):
            conn.execute(sa.text(f"VACUUM ANALYZE {PREFIX}_{table}"))
    engine.dispose()


def _drain(dsn: str, tree: Path, concurrency: int, batch_size: int, processes: int,
           supervised: bool, driver: str = "psycopg2", schedules: int | None = None,
           idle_keyed: bool = False) -> dict[str, float]:
    """One drain in a child process on ``tree``: ``_child``, or ``_firing`` with ``schedules`` (``--schedules``);
    with ``idle_keyed`` its queue registers the idle keyed kind too (``--idle-keyed``)."""
    env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONDONTWRITEBYTECODE": "1", IDLE_KEYED: "1" if idle_keyed else ""}
    if schedules is None:
        args = ["_child", dsn, str(concurrency), str(batch_size), str(processes),
                "supervised" if supervised else "in-process", driver]
    else:
        args = ["_firing", dsn, str(concurrency), str(batch_size), str(schedules)]
    res = subprocess.run([sys.executable, str(Path(__file__).resolve()), *args],
                         capture_output=True, text=True, env=env, check=True)
    return json.loads([ln for ln in res.stdout.splitlines() if ln.startswith("{")][-1])


def _forget_ticks(dsn: str) -> None:
    """Delete the fired tick jobs and their fire records (no variant claims them)."""
    import sqlalchemy as sa

    engine = sa.create_engine(dsn)
    with engine.begin() as conn:
        conn.execute(sa.text(f"DELETE FROM {PREFIX}_fires"))
        conn.execute(sa.text(f"DELETE FROM {PREFIX}_jobs WHERE kind = 'tick'"))
    engine.dispose()


def main(argv: list[str]) -> int:
    if argv[:1] == ["_enqueue"]:
        _enqueue_child(argv[1], int(argv[2]))
        return 0
    if argv[:1] == ["_child"]:
        _child(argv[1], int(argv[2]), int(argv[3]), int(argv[4]), argv[5] == "supervised", argv[6])
        return 0
    if argv[:1] == ["_firing"]:
        _firing_child(argv[1], int(argv[2]), int(argv[3]), int(argv[4]))
        return 0
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--a", type=Path, required=True, help="source tree A (a venturi checkout)")
    p.add_argument("--b", type=Path, required=True, help="source tree B")
    p.add_argument("--n", type=int, default=4000)
    p.add_argument("--rounds", type=int, default=6, help="an even number: the order alternates")
    p.add_argument("--concurrency", type=int, default=10)
    p.add_argument("--batch-size", type=int, default=100)
    p.add_argument("--processes", default="1", help="B only: worker processes, comma-separated (A uses 1)")
    p.add_argument("--supervised", action="store_true",
                   help="B runs under the supervisor (venturi worker --processes), timed from all children ready")
    p.add_argument("--drivers", default="psycopg2",
                   help="comma-separated: psycopg2, psycopg, asyncpg, psycopg_async (in-process workers only)")
    p.add_argument("--schedules", type=int, help="A fires no schedules, B fires this many every second "
                   "(both Worker.run())")
    p.add_argument("--idle-keyed", choices=("b", "both"),
                   help="B's queue (or both queues) also registers a keyed kind with no jobs")
    p.add_argument("--port", type=int, help="an existing superuser/trust server on 127.0.0.1")
    a = p.parse_args(argv)
    sys.path.insert(0, str(BENCH_DIR))
    from ab_kit import fresh_database, load, release

    cluster, dsn, admin = fresh_database(a.port, "ab_drain", PREFIX)
    drivers = a.drivers.split(",")
    if a.schedules is not None and drivers != ["psycopg2"]:
        p.error("--schedules runs on psycopg2 only (leave out --drivers)")
    named = (lambda name, d: name) if drivers == ["psycopg2"] else (lambda name, d: f"{name}/{d}")
    variants = []
    for d in drivers:  # (name, tree, processes or schedules, driver, the A it is compared with)
        variants.append((named("A", d), a.a.resolve(), 1, d, named("A", d)))
        variants += [(named(f"B/p{k}", d), a.b.resolve(), int(k), d, named("A", d)) for k in a.processes.split(",")]
    if a.schedules is not None:
        variants = [("A", a.a.resolve(), 0, "psycopg2", "A"),
                    (f"B/{a.schedules} schedules", a.b.resolve(), a.schedules, "psycopg2", "A")]
    rates: dict[str, list[float]] = {v[0]: [] for v in variants}
    cpus: dict[str, list[float]] = {v[0]: [] for v in variants}
    print(load(), flush=True)
    try:
        for r in range(a.rounds):
            order = variants if r % 2 == 0 else variants[::-1]
            for name, tree, processes, driver, _ in order:
                _enqueue(dsn, a.b.resolve(), a.n)
                keyed = a.idle_keyed == "both" or (a.idle_keyed == "b" and not name.startswith("A"))
                if a.schedules is None:
                    out = _drain(dsn, tree, a.concurrency, a.batch_size, processes,
                                 a.supervised and not name.startswith("A"), driver, idle_keyed=keyed)
                else:
                    out = _drain(dsn, tree, a.concurrency, a.batch_size, 1, False, schedules=processes,
                                 idle_keyed=keyed)
                    _forget_ticks(dsn)
                rates[name].append(out["jobs"] / out["seconds"])
                cpus[name].append(1e6 * out["cpu"] / max(1, out["jobs"]))
                fired = f", fired {out['fired']} jobs ({out['fired'] / out['seconds']:.0f}/s)" if "fired" in out else ""
                print(f"round {r + 1} {name} ({out['tree']}): {out['jobs']} jobs, {rates[name][-1]:,.0f} jobs/s, "
                      f"{cpus[name][-1]:.0f} µs CPU/job{fired}; {load()}", flush=True)
        first = statistics.median(rates[variants[0][0]])
        for name, _, _, _, base_name in variants:
            median = statistics.median(rates[name])
            versus = "" if len(drivers) == 1 else f", {median / first:.2f}× {variants[0][0]}"
            print(f"{name}: median {median:,.0f} jobs/s ({median / statistics.median(rates[base_name]):.2f}× "
                  f"{base_name}{versus}), {statistics.median(cpus[name]):.0f} µs CPU/job")
        print(load(), flush=True)
    finally:
        release(cluster, admin)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
