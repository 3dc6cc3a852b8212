#!/usr/bin/env python
"""Same-run A/B of the wake-up latency per driver: the drivers alternate on one cluster.

    bench/.venv/bin/python bench/ab_wake.py                                 # psycopg2 vs psycopg, 5 rounds
    bench/.venv/bin/python bench/ab_wake.py --drivers psycopg2,psycopg,asyncpg,psycopg_async --rounds 3
    bench/.venv/bin/python bench/ab_wake.py --a /tmp/venturi-base --b . --drivers psycopg   # two trees

What ``bench/run.py --phases latency`` measures, without a cluster per
driver: each round starts, for every variant, a worker process (``Worker``
defaults, LISTEN on; on an ``AsyncEngine`` for asyncpg and psycopg_async)
on one durable throwaway cluster (``bench/run.py``'s settings), lets it
settle, then enqueues ``--n`` jobs one at a time every ``--spacing``
seconds, each in its own session and commit, on the same driver (an
``AsyncSession`` with ``enqueue_async`` for the async ones; ``--enqueuer
psycopg2`` uses psycopg2 for every variant, which isolates the worker's
side).  The latency of a job is its handler's start minus the return of the
enqueuer's commit (``time.monotonic``, system-wide on Linux); it is split
at the worker's ``claimed`` event into wake-and-claim and claim-to-start.
Prints per round each variant's p50 and p90 and the load average, then the
medians of the rounds and the median of the same-round p50 ratios to the
first variant.  Only the ratios mean anything on a shared machine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
PREFIX = "abw"
ASYNC_DRIVERS = ("asyncpg", "psycopg_async")
STARTED: dict[int, float] = {}  # seq -> handler start, in the worker process
SEQ_OF: dict[int, str] = {}
ALL_STARTED = threading.Event()
EXPECTED = [0]


def _queue() -> tuple[Any, Any]:
    """``(queue, mark)``: ``mark(seq=...)`` records when its handler starts (in :data:`STARTED`)."""
    from marshmallow import Schema, fields

    import venturi_sa

    class Seq(Schema):
        seq = fields.Integer(required=True)

    queue = venturi_sa.Queue(venturi_sa.make_models(PREFIX))

    @queue.task("mark", payload=Seq)
    def mark(payload: Any, ctx: venturi_sa.JobContext) -> None:
        STARTED[payload["seq"]] = time.monotonic()
        SEQ_OF[payload["seq"]] = ctx.job_id
        if len(STARTED) >= EXPECTED[0]:
            ALL_STARTED.set()

    return queue, mark


def _url(dsn: str, driver: str) -> Any:
    import sqlalchemy as sa

    return sa.make_url(dsn).set(drivername=f"postgresql+{driver}")


TRACE: dict[str, list[Any]] = {"heard": [], "rounds": [], "gc": []}


def _trace() -> None:
    """Record, in this worker process, when the listener hears a notification, each claim round's start,
    end and size, and every garbage collection (``--trace``)."""
    import gc

    from venturi_sa.worker import listener, producer

    deliver = listener.deliver

    def heard(notes: Any, *args: Any) -> None:
        if notes:
            TRACE["heard"].append(time.monotonic())
        deliver(notes, *args)

    listener.deliver = heard  # type: ignore[assignment]
    claim_round = producer.Producer.claim_round

    def timed(self: Any) -> Any:
        t0 = time.monotonic()
        result = claim_round(self)
        TRACE["rounds"].append((t0, time.monotonic(), result.claimed))
        return result

    producer.Producer.claim_round = timed  # type: ignore[method-assign]
    gc_start: list[float] = [0.0]

    def on_gc(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            gc_start[0] = time.monotonic()
        else:
            TRACE["gc"].append((gc_start[0], time.monotonic(), info["generation"]))

    gc.callbacks.append(on_gc)


def _worker_child(dsn: str, driver: str, n: int, trace: bool = False) -> None:
    """A default Worker on ``driver`` until ``n`` jobs started; prints READY, then each job's times as JSON."""
    import sqlalchemy as sa

    import venturi_sa

    if trace:
        _trace()
    queue, _ = _queue()
    EXPECTED[0] = n + 1  # and the warm-up job
    claimed: dict[str, float] = {}

    def on_event(name: str, data: dict[str, Any]) -> None:
        if name == "claimed":
            claimed[data["job_id"]] = time.monotonic()

    if driver in ASYNC_DRIVERS:
        from sqlalchemy.ext.asyncio import create_async_engine

        engine: Any = create_async_engine(_url(dsn, driver), pool_size=15, max_overflow=10)
    else:
        engine = sa.create_engine(_url(dsn, driver), pool_size=15, max_overflow=10)
    worker = venturi_sa.Worker(queue, engine, on_event=on_event)
    thread = threading.Thread(target=worker.run, name="ab-wake-worker")
    thread.start()
    while worker.listener is None or not worker.listener.connected.is_set():
        time.sleep(0.01)
    print("READY", flush=True)
    ALL_STARTED.wait(120)
    worker.stop()
    thread.join(60)
    if isinstance(engine, sa.Engine):
        engine.dispose()
    print(json.dumps({"started": STARTED, "claimed": {s: claimed.get(j) for s, j in SEQ_OF.items()},
                      "tree": venturi_sa.__file__, "trace": TRACE}), flush=True)


class _Enqueuer:
    """One job per session and commit on ``driver``; :meth:`one` returns when the session is closed."""

    def __init__(self, dsn: str, driver: str) -> None:
        import sqlalchemy as sa

        self.queue, self.mark = _queue()
        self.is_async = driver in ASYNC_DRIVERS
        if self.is_async:
            from sqlalchemy.ext.asyncio import create_async_engine

            self.loop = asyncio.new_event_loop()
            self.engine: Any = create_async_engine(_url(dsn, driver))
        else:
            self.engine = sa.create_engine(_url(dsn, driver))

    async def _one_async(self, seq: int) -> None:
        from sqlalchemy.ext.asyncio import AsyncSession

        async with AsyncSession(self.engine) as session:
            await self.queue.enqueue_async(session, self.mark(seq=seq))
            await session.commit()

    def one(self, seq: int) -> None:
        if self.is_async:
            self.loop.run_until_complete(self._one_async(seq))
            return
        from sqlalchemy.orm import Session

        with Session(self.engine) as session:
            self.queue.enqueue(session, self.mark(seq=seq))
            session.commit()

    def close(self) -> None:
        if self.is_async:
            self.loop.run_until_complete(self.engine.dispose())
            self.loop.close()
        else:
            self.engine.dispose()


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _stages(commits: dict[int, float], started: dict[int, float], trace: dict[str, list[Any]]) -> str:
    """``--trace``: each wake-up split into delivery, listener-to-producer, claim and claim-to-start; the
    stages' p50/p90/max and the samples above p90 with the collections that overlapped them."""
    import bisect

    heard = sorted(trace["heard"])
    rounds = sorted(tuple(r) for r in trace["rounds"] if r[2] > 0)
    ends = [r[1] for r in rounds]
    rows = []
    for seq, c in commits.items():
        if seq not in started:
            continue
        i = bisect.bisect_left(heard, c - 0.01)
        j = bisect.bisect_left(ends, c)
        if i >= len(heard) or j >= len(rounds):
            continue
        t_heard, (c0, c1, _) = heard[i], rounds[j]
        gcs = [g for g in trace["gc"] if g[1] >= c and g[0] <= started[seq]]
        rows.append({"total": started[seq] - c, "delivery": t_heard - c, "to_producer": c0 - t_heard,
                     "claim": c1 - c0, "to_start": started[seq] - c1, "gc": gcs})
    lines = []
    for stage in ("total", "delivery", "to_producer", "claim", "to_start"):
        v = sorted(1e3 * r[stage] for r in rows)
        lines.append(f"  {stage:12} p50 {_pct(v, 0.5):6.2f}  p90 {_pct(v, 0.9):6.2f}  p99 {_pct(v, 0.99):6.2f}  "
                     f"max {v[-1]:6.2f} ms")
    cut = _pct([r["total"] for r in rows], 0.9)
    slow = sorted((r for r in rows if r["total"] > cut), key=lambda r: -r["total"])
    for r in slow[:8]:
        gcs = ", ".join(f"gen{g[2]} {1e3 * (g[1] - g[0]):.2f}" for g in r["gc"]) or "none"
        lines.append("  slow: " + " ".join(f"{k} {1e3 * r[k]:.2f}" for k in
                                           ("total", "delivery", "to_producer", "claim", "to_start"))
                     + f"; gc: {gcs}")
    lines.append(f"  collections during the run: {len(trace['gc'])}, "
                 f"longest {max((1e3 * (g[1] - g[0]) for g in trace['gc']), default=0):.2f} ms")
    return "\n".join(lines)


def _measure(dsn: str, tree: Path, driver: str, enqueuer: str, n: int, spacing: float,
             trace: bool = False) -> dict[str, Any]:
    """One variant once: its worker process, ``n`` timed enqueues, the latencies in ms."""
    env = {**os.environ, "PYTHONPATH": f"{tree}{os.pathsep}{BENCH_DIR}", "PYTHONDONTWRITEBYTECODE": "1"}
    proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "_worker", dsn, driver, str(n),
                             *(["trace"] if trace else [])],
                            stdout=subprocess.PIPE, text=True, env=env)
    assert proc.stdout is not None
    try:
        line = proc.stdout.readline().strip()
        if line != "READY":
            raise RuntimeError(f"the {driver} worker did not start: {line!r}")
        enq = _Enqueuer(dsn, driver if enqueuer == "same" else enqueuer)
        try:
            enq.one(-1)  # warm the enqueuer's connection (and the worker's first claim); not counted
            time.sleep(0.5)  # the worker is idle again: back to waiting on LISTEN
            commits: dict[int, float] = {}
            t0 = time.monotonic()
            for seq in range(n):
                delay = t0 + seq * spacing - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
                enq.one(seq)
                commits[seq] = time.monotonic()
        finally:
            enq.close()
        out, _ = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
    got = json.loads([ln for ln in out.splitlines() if ln.startswith("{")][-1])
    started = {int(s): t for s, t in got["started"].items()}
    claimed = {int(s): t for s, t in got["claimed"].items() if t is not None}
    seqs = [s for s in range(n) if s in started]
    total = [1e3 * (started[s] - commits[s]) for s in seqs]
    wake = [1e3 * (claimed[s] - commits[s]) for s in seqs if s in claimed]
    start = [1e3 * (started[s] - claimed[s]) for s in seqs if s in claimed]
    return {"p50": _pct(total, 0.5), "p90": _pct(total, 0.9), "p99": _pct(total, 0.99),
            "wake_claim": statistics.median(wake), "to_start": statistics.median(start), "received": len(seqs),
            "tree": got["tree"], "stages": _stages(commits, started, got["trace"]) if trace else ""}


def _listed(values: Any) -> str:
    return ", ".join(f"{x:.2f}" for x in values)


def main(argv: list[str]) -> int:
    if argv[:1] == ["_worker"]:
        _worker_child(argv[1], argv[2], int(argv[3]), argv[4:5] == ["trace"])
        return 0
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--drivers", default="psycopg2,psycopg",
                   help="comma-separated: psycopg2, psycopg, asyncpg, psycopg_async (the first is the reference)")
    p.add_argument("--a", type=Path, default=Path("."), help="source tree A (default: this checkout)")
    p.add_argument("--b", type=Path, help="source tree B: every driver also runs on it")
    p.add_argument("--n", type=int, default=200, help="wake-ups per variant and round")
    p.add_argument("--spacing", type=float, default=0.02, help="seconds between enqueues (the harness's 0.02)")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--enqueuer", default="same", help="'same' (each variant's driver) or a sync driver for all")
    p.add_argument("--port", type=int, help="an existing superuser/trust server on 127.0.0.1")
    p.add_argument("--trace", action="store_true",
                   help="split each wake-up into its stages (listener, producer, claim, hand-off) and list the "
                        "slowest with the garbage collections that overlapped them")
    a = p.parse_args(argv)
    sys.path.insert(0, str(BENCH_DIR))
    from ab_kit import fresh_database, load, release

    cluster, dsn, admin = fresh_database(a.port, "ab_wake", PREFIX)
    trees = [("A", a.a.resolve())] + ([("B", a.b.resolve())] if a.b else [])
    variants = [(f"{t}/{d}" if a.b else d, tree, d) for d in a.drivers.split(",") for t, tree in trees]
    results: dict[str, list[dict[str, Any]]] = {v[0]: [] for v in variants}
    ref = variants[0][0]
    print(f"{load()}; {a.n} wake-ups every {a.spacing * 1e3:.0f} ms per variant, enqueuer {a.enqueuer}", flush=True)
    try:
        for r in range(a.rounds):
            order = variants if r % 2 == 0 else variants[::-1]
            for name, tree, driver in order:
                res = _measure(dsn, tree, driver, a.enqueuer, a.n, a.spacing, a.trace)
                results[name].append(res)
                print(f"round {r + 1} {name}: p50 {res['p50']:.2f} ms, p90 {res['p90']:.2f} ms, "
                      f"p99 {res['p99']:.2f} ms "
                      f"(wake+claim {res['wake_claim']:.2f}, claim->start {res['to_start']:.2f}; "
                      f"{res['received']}/{a.n}); {load()}", flush=True)
                if res["stages"]:
                    print(res["stages"], flush=True)
        for name, _, _ in variants:
            rounds = results[name]
            ratios = [x["p50"] / y["p50"] for x, y in zip(rounds, results[ref], strict=True)]
            print(f"{name}: p50 {statistics.median(x['p50'] for x in rounds):.2f} ms "
                  f"[{_listed(x['p50'] for x in rounds)}], "
                  f"p90 {statistics.median(x['p90'] for x in rounds):.2f} ms, "
                  f"p99 {statistics.median(x['p99'] for x in rounds):.2f} ms, "
                  f"wake+claim {statistics.median(x['wake_claim'] for x in rounds):.2f}, "
                  f"claim->start {statistics.median(x['to_start'] for x in rounds):.2f}; "
                  f"p50 / {ref} same round: median {statistics.median(ratios):.2f} "
                  f"[{_listed(ratios)}]")
        print(load(), flush=True)
    finally:
        release(cluster, admin)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
