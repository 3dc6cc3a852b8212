#!/usr/bin/env python
"""How fast each driver's LISTEN adapter hears a NOTIFY: the listener alone, drivers in alternation.

    bench/.venv/bin/python bench/listen_latency.py              # 3 rounds x 200 notifications per driver
    bench/.venv/bin/python bench/listen_latency.py --rounds 5 --n 500

Runs the worker's own listener (``Listener`` thread on psycopg2 and psycopg
3, ``LoopListener`` on the worker loop for asyncpg and psycopg_async) on one
durable throwaway cluster (``bench/run.py``'s settings).  A psycopg2
connection sends ``pg_notify`` and commits; the time from that commit's
return to the listener's ``wake`` event being seen set by the sending
thread is one sample.  Prints per round each driver's p50 and p90 and the
load average, then the medians.  What is left of a worker's wake-up
latency (``bench/ab_wake.py``) is the claim and the hand-off to the
handler's thread.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time
from typing import Any

ASYNC_DRIVERS = ("asyncpg", "psycopg_async")
CHANNEL = "venturi_listen_bench"


def _listener(base: str, driver: str, wake: threading.Event, stop: threading.Event) -> Any:
    import sqlalchemy as sa

    from venturi_sa.worker.listener import Listener, LoopListener
    from venturi_sa.worker.loop import worker_loop

    if driver in ASYNC_DRIVERS:
        from sqlalchemy.ext.asyncio import create_async_engine

        async def made() -> Any:  # on the loop its connections belong to
            return create_async_engine(f"postgresql+{driver}://{base}")

        return LoopListener(worker_loop().run(made()), CHANNEL, wake)
    return Listener(sa.create_engine(f"postgresql+{driver}://{base}"), CHANNEL, wake, stop)


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--drivers", default="psycopg2,psycopg,asyncpg,psycopg_async")
    p.add_argument("--n", type=int, default=200, help="notifications per driver and round")
    p.add_argument("--rounds", type=int, default=3)
    a = p.parse_args(argv)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import psycopg2
    from run import PG_SETTINGS

    from venturi_sa.devtools.throwaway import ThrowawayCluster

    cluster = ThrowawayCluster(PG_SETTINGS).start()
    base = f"postgres@127.0.0.1:{cluster.port}/postgres"
    sender = psycopg2.connect(f"postgresql://{base}")
    p50s: dict[str, list[float]] = {}
    print("load " + " ".join(f"{x:.2f}" for x in os.getloadavg()), flush=True)
    try:
        for r in range(a.rounds):
            for driver in a.drivers.split(","):
                wake, stop = threading.Event(), threading.Event()
                listener = _listener(base, driver, wake, stop)
                listener.start()
                if not listener.connected.wait(10):
                    raise RuntimeError(f"the {driver} listener did not connect")
                time.sleep(0.3)  # past its connect-time wake
                samples = []
                for _ in range(a.n):
                    time.sleep(0.01)
                    wake.clear()
                    sender.cursor().execute("SELECT pg_notify(%s, '')", (CHANNEL,))
                    sender.commit()
                    t0 = time.monotonic()
                    if wake.wait(5):
                        samples.append(1e3 * (time.monotonic() - t0))
                stop.set()
                listener.join(5)
                ordered = sorted(samples)
                p50s.setdefault(driver, []).append(statistics.median(ordered))
                print(f"round {r + 1} {driver}: p50 {statistics.median(ordered):.3f} ms, "
                      f"p90 {ordered[int(0.9 * len(ordered))]:.3f} ms ({len(samples)}/{a.n}); "
                      f"load {os.getloadavg()[0]:.2f}", flush=True)
        for driver, values in p50s.items():
            print(f"{driver}: p50 median {statistics.median(values):.3f} ms "
                  f"[{', '.join(f'{v:.3f}' for v in values)}]")
    finally:
        sender.close()
        cluster.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
