"""A worker process for the periodic tests (``support.processes.Procs``; settings from ``VENTURI_*``).

Its queue registers one kind, ``VENTURI_KIND`` (``tick``, the default, or
``tock``), and declares ``VENTURI_SCHEDULES`` schedules of it named
``<kind>-<i>`` (``every=VENTURI_PERIOD`` seconds, default 1, catch-up
``all_within(1h)``, payload ``n=i``), so that a test which puts their next
fire times back makes many fire times due at once.  It prints ``READY
<pid>`` before the worker starts and, after SIGTERM stopped it, ``EXIT <pid>
<processed>`` and ``FIRED <pid> <jobs>`` (the jobs it fired).  Each fire
transaction handles at most 5 fire times, so the workers race over many
transactions.  With ``VENTURI_KILL_AT`` (n > 0), the process SIGKILLs itself
in the middle of its n-th fire: after the jobs and ``_fires`` rows are
inserted, as the compare-and-set is sent, before the commit.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

import sqlalchemy as sa
from support.periodic import Tick, Tock
from support.processes import serve_worker

from venturi_sa import Queue, Worker, make_models
from venturi_sa.periodic import all_within, policies

PERIOD = timedelta(seconds=1)
WINDOW = timedelta(hours=1)
KINDS = {"tick": Tick, "tock": Tock}


def race_queue(prefix: str, schedules: int, kind: str = "tick", period: timedelta = PERIOD) -> Queue:
    """The app's queue: ``kind`` only, with ``schedules`` schedules ``<kind>-<i>`` every ``period``."""
    task = KINDS[kind]
    queue = Queue(make_models(prefix), [task])
    for i in range(schedules):
        queue.schedule(task(n=i), every=period, name=f"{kind}-{i}", catch_up=all_within(WINDOW))
    return queue


def main() -> int:
    prefix, fired = os.environ["VENTURI_PREFIX"], [0]
    policies.BATCH = 5

    def count(name: str, data: dict[str, Any]) -> None:
        if name == "schedule_fired":
            fired[0] += data["count"]

    def build(env: Mapping[str, str], engine: sa.Engine) -> Worker:
        kill_at = int(env.get("VENTURI_KILL_AT", "0"))
        if kill_at:
            sent = [0]

            @sa.event.listens_for(engine, "before_cursor_execute")
            def die_mid_fire(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
                if statement.startswith(f"UPDATE {prefix}_schedules"):
                    sent[0] += 1
                    if sent[0] == kill_at:
                        os.kill(os.getpid(), signal.SIGKILL)

        queue = race_queue(prefix, int(env.get("VENTURI_SCHEDULES", "0")), env.get("VENTURI_KIND", "tick"),
                           timedelta(seconds=float(env.get("VENTURI_PERIOD", "1"))))
        return Worker(queue, engine, concurrency=2, poll_interval=0.5, on_event=count)

    serve_worker(build, pool_pre_ping=True, application_name=f"periodic-{prefix}")
    print(f"FIRED {os.getpid()} {fired[0]}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
