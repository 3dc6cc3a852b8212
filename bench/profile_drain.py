#!/usr/bin/env python
"""Profile venturi's worker draining N no-op jobs (py-spy, all threads).

    bench/.venv/bin/python bench/profile_drain.py                 # 20k jobs, Worker defaults
    bench/.venv/bin/python bench/profile_drain.py --concurrency 100 --batch-size 100
    bench/.venv/bin/python bench/profile_drain.py --enqueue      # cProfile of enqueue_many instead
    bench/.venv/bin/python bench/profile_drain.py --driver asyncpg   # a Worker on an AsyncEngine

Starts a durable throwaway cluster (as bench/run.py; or ``--port`` for an
existing server), enqueues ``--n`` jobs with ``Queue.enqueue_many``, then runs
``Worker.run_until_idle()`` in a child process under ``py-spy record`` (on-CPU
samples of every thread, native frames off).  Writes ``<out>/stacks.txt``
(collapsed stacks, for flame graphs) and ``<out>/profile.md``: drain rate and
the top functions by self and by inclusive GIL-holding time.  ``--driver``
picks the worker's driver as in ``bench/run.py`` (``asyncpg`` and
``psycopg_async``: a Worker on an ``AsyncEngine``).  ``--enqueue``
profiles ``Queue.enqueue_many`` (chunks of 1,000 + commit, one thread) with
cProfile instead and writes ``<out>/enqueue.md``.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent


def _drain(dsn: str, concurrency: int, batch_size: int) -> None:
    """Child: drain the queue once and print jobs/s as JSON."""
    import sqlalchemy as sa
    from venturi_adapter import queue, worker_engine_for

    import venturi_sa

    engine = worker_engine_for(dsn, pool_size=concurrency + 5, max_overflow=10)
    worker = venturi_sa.Worker(queue, engine, concurrency=concurrency, batch_size=batch_size, listen=False)
    t0 = time.perf_counter()
    n = worker.run_until_idle()
    elapsed = time.perf_counter() - t0
    print(json.dumps({"jobs": n, "seconds": elapsed, "jobs_per_s": n / elapsed}), flush=True)
    if isinstance(engine, sa.Engine):
        engine.dispose()  # an AsyncEngine's connections were closed by the worker, on its loop


def _not_a_frame(frame: str) -> bool:
    """py-spy's thread and process labels (a function named ``process`` is a frame)."""
    return frame.startswith("thread") or (frame.startswith("process") and not frame.startswith("process ("))


def summarize(stacks: Path, top: int = 25, seconds: float | None = None, rate: int = 100) -> str:
    """Top functions by self and inclusive samples from py-spy's collapsed ('raw') output.

    Start-up samples (the main thread outside ``run_until_idle``, and ``Worker._start``) are left out.  With
    ``--gil`` every sample is a moment some thread held the GIL, so samples /
    (rate x seconds) is the share of the drain the interpreter was busy.
    """
    self_c: collections.Counter[str] = collections.Counter()
    incl: collections.Counter[str] = collections.Counter()
    by_thread: collections.Counter[str] = collections.Counter()
    total = 0
    for line in stacks.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack:
            continue
        n = int(count)
        frames = [f.strip() for f in stack.split(";") if f.strip()]
        main_thread = any(f.startswith("<module> (profile_drain.py") for f in frames)
        if main_thread and not any(f.startswith("Worker.run_until_idle (") for f in frames):
            continue
        if any(f.startswith("Worker._start (") for f in frames):
            continue  # the worker's start-up (schema check, its first alembic import), not the drain
        total += n
        if frames and frames[0].startswith("thread"):
            by_thread[frames[0]] += n
        names = [f.split(" (")[0] + " (" + f.split(" (", 1)[1].rsplit(":", 1)[0].rsplit("/", 1)[-1] + ")"
                 if " (" in f else f for f in frames if not _not_a_frame(f)]
        if names:
            self_c[names[-1]] += n
        for name in set(names):
            incl[name] += n
    busy = f"; GIL held {100 * total / (rate * seconds):.0f} % of the drain" if seconds else ""
    lines = [f"GIL-holding samples: {total}{busy}\n", "| self % | function (file) |", "|---|---|"]
    lines += [f"| {100 * c / total:.1f} | `{f}` |" for f, c in self_c.most_common(top)]
    lines += ["", "| inclusive % | function (file) |", "|---|---|"]
    lines += [f"| {100 * c / total:.1f} | `{f}` |" for f, c in incl.most_common(top + 15)]
    lines += ["", "Per-job work (inclusive %; 0 where a function no longer exists):", "",
              "| inclusive % | function (file) |", "|---|---|"]
    lines += [f"| {100 * sum(c for f, c in incl.items() if f.startswith(name)) / total:.1f} | `{name}` |"
              for name in PER_JOB]
    return "\n".join(lines) + "\n"


PER_JOB = ("Worker._dispatch (", "JobContext.__init__ (", "ClaimedJob.__init__ (", "FinishParams.__init__ (",
           "__create_fn__.<locals>.__init__ (", "Condition.__init__ (", "Event.__init__ (", "_batch_columns (",
           "RunPipeline.handle (", "decide (pipeline.py)", "SQLCompiler._process_parameters_for_postcompile (",
           "CursorFetchStrategy.fetchall (", "loads (__init__.py)")
"""What the per-job table of :func:`summarize` follows (prefixes of ``name (file)``)."""


def profile_enqueue(dsn: str, n: int, out: Path) -> str:
    """cProfile ``n`` jobs enqueued with ``enqueue_many`` in chunks of 1,000 (one commit each)."""
    import cProfile
    import io
    import pstats

    from sqlalchemy.orm import Session
    from venturi_adapter import engine_for, noop, queue

    engine = engine_for(dsn)
    prof = cProfile.Profile()
    t0 = time.perf_counter()
    prof.enable()
    for start in range(0, n, 1000):
        with Session(engine) as session:
            queue.enqueue_many(session, [noop(seq=s) for s in range(start, min(n, start + 1000))])
            session.commit()
    prof.disable()
    elapsed = time.perf_counter() - t0
    engine.dispose()
    prof.dump_stats(str(out / "enqueue.prof"))
    parts = [f"# venturi enqueue_many profile\n\n{n:,} jobs in chunks of 1,000: {elapsed:.2f} s under "
             f"cProfile = **{n / elapsed:,.0f} jobs/s**\n"]
    for key in ("tottime", "cumulative"):
        buf = io.StringIO()
        pstats.Stats(prof, stream=buf).sort_stats(key).print_stats(25)
        parts.append(f"## by {key}\n\n```\n" + buf.getvalue().split("\n\n", 1)[-1].strip() + "\n```\n")
    return "\n".join(parts)


def main(argv: list[str]) -> int:
    if argv[:1] == ["_drain"]:
        _drain(argv[1], int(argv[2]), int(argv[3]))
        return 0
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=20_000)
    p.add_argument("--concurrency", type=int, default=10)
    p.add_argument("--batch-size", type=int, default=100)
    p.add_argument("--rate", type=int, default=100, help="py-spy samples per second")
    p.add_argument("--enqueue", action="store_true", help="profile enqueue_many (cProfile) instead")
    p.add_argument("--driver", choices=("psycopg2", "psycopg", "asyncpg", "psycopg_async"), default="psycopg2",
                   help="the worker's driver, as bench/run.py --driver")
    p.add_argument("--port", type=int, help="existing server on 127.0.0.1 (superuser, trust)")
    p.add_argument("--out", type=Path, default=BENCH_DIR / "results" / ("profile-" + time.strftime("%Y%m%d-%H%M%S")))
    a = p.parse_args(argv)
    a.out.mkdir(parents=True, exist_ok=True)
    os.environ["VENTURI_BENCH_DRIVER"] = a.driver  # read by venturi_adapter, here and in the child
    sys.path.insert(0, str(BENCH_DIR))
    from run import find_harness, load_harness

    harness = find_harness()
    load_harness(harness)
    import psycopg2
    from ab_kit import fresh_database, server
    from sqlalchemy.orm import Session
    from venturi_adapter import PREFIX, engine_for, noop, queue

    with server(a.port) as port:
        _, url, conn = fresh_database(port, "pb_venturi_profile", PREFIX)
        dsn = url.replace("postgresql+psycopg2://", "postgresql://", 1)  # libpq's form: the adapter picks the driver
        engine = engine_for(dsn)
        if a.enqueue:
            text = profile_enqueue(dsn, a.n, a.out)
            (a.out / "enqueue.md").write_text(text)
            print(text)
            engine.dispose()
            conn.cursor().execute("DROP DATABASE IF EXISTS pb_venturi_profile WITH (FORCE)")
            return 0
        with Session(engine) as session:
            for start in range(0, a.n, 1000):
                queue.enqueue_many(session, [noop(seq=s) for s in range(start, min(a.n, start + 1000))])
                session.commit()
        engine.dispose()
        c2 = psycopg2.connect(dsn)
        c2.autocommit = True
        c2.cursor().execute("VACUUM ANALYZE")
        c2.cursor().execute("CHECKPOINT")
        c2.close()
        py_spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
        stacks = a.out / "stacks.txt"
        cmd = [py_spy, "record", "--format", "raw", "--threads", "--gil", "--rate", str(a.rate), "-o", str(stacks),
               "--", sys.executable, str(Path(__file__).resolve()), "_drain", dsn, str(a.concurrency),
               str(a.batch_size)]
        # this checkout's venturi_sa first, whichever checkout bench/.venv was set up from
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(BENCH_DIR), str(BENCH_DIR.parent), str(harness)]),
               "PYTHONDONTWRITEBYTECODE": "1"}
        res = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True)
        stats = json.loads([ln for ln in res.stdout.splitlines() if ln.startswith("{")][-1])
        head = (f"# venturi drain profile ({a.driver})\n\n{a.n:,} no-op jobs, Worker(concurrency={a.concurrency}, "
                f"batch_size={a.batch_size}, listen=False).run_until_idle(): {stats['jobs']:,} jobs in "
                f"{stats['seconds']:.1f} s = **{stats['jobs_per_s']:,.0f} jobs/s** under py-spy "
                f"({a.rate} Hz, --gil: only GIL-holding samples; durable cluster).\n\n")
        text = head + summarize(stacks, seconds=stats["seconds"], rate=a.rate)
        (a.out / "profile.md").write_text(text)
        print(text)
        conn.cursor().execute("DROP DATABASE IF EXISTS pb_venturi_profile WITH (FORCE)")
        conn.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
