"""A worker process for the periodic race tests: ``python periodic_app.py DSN PREFIX SCHEDULES [KILL_AT]``.

It declares ``SCHEDULES`` schedules of kind ``tick`` (``every=1s``, catch-up
``all_within(1h)``, payload ``n=i``), so that a test which puts their next
fire times back makes hundreds of fire times due at once, and runs a
``Worker`` until SIGTERM.  It prints ``READY <pid>`` before the worker starts and ``FIRED <pid> <jobs>`` (jobs
it fired) when SIGTERM stopped it.  Each fire transaction handles at most 5 fire
times, so the workers race over many transactions.  With ``KILL_AT`` (n >
0), the process SIGKILLs itself in the middle of its n-th fire: after the
jobs and ``_fires`` rows are inserted, as the compare-and-set is sent,
before the commit.
"""

from __future__ import annotations

import os
import signal
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import sqlalchemy as sa

if __name__ == "__main__":  # run as a script: the kit beside it, the installed venturi
    sys.path.insert(0, str(Path(__file__).resolve().parent))

from periodic_kit import Tick, tick_queue  # noqa: E402

from venturi_sa import Queue, Worker  # noqa: E402
from venturi_sa.periodic import all_within, policies  # noqa: E402

PERIOD = timedelta(seconds=1)
WINDOW = timedelta(hours=1)


def race_queue(prefix: str, schedules: int) -> Queue:
    queue = tick_queue(prefix)
    for i in range(schedules):
        queue.schedule(Tick(n=i), every=PERIOD, name=f"race-{i}", catch_up=all_within(WINDOW))
    return queue


def main() -> int:
    dsn, prefix, schedules = sys.argv[1], sys.argv[2], int(sys.argv[3])
    kill_at = int(sys.argv[4]) if len(sys.argv) > 4 else 0
    policies.BATCH = 5
    engine = sa.create_engine(dsn, pool_size=8, pool_pre_ping=True, connect_args={"options": "-c timezone=UTC",
                                                              "application_name": f"periodic-{prefix}"})
    if kill_at:
        sent = [0]

        @sa.event.listens_for(engine, "before_cursor_execute")
        def die_mid_fire(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
            if statement.startswith(f"UPDATE {prefix}_schedules"):
                sent[0] += 1
                if sent[0] == kill_at:
                    os.kill(os.getpid(), signal.SIGKILL)

    fired = [0]

    def count(name: str, data: dict[str, Any]) -> None:
        if name == "schedule_fired":
            fired[0] += data["count"]

    worker = Worker(race_queue(prefix, schedules), engine, concurrency=2, poll_interval=0.5, on_event=count)
    print(f"READY {os.getpid()}", flush=True)
    worker.run()
    print(f"FIRED {os.getpid()} {fired[0]}", flush=True)
    engine.dispose()
    return 0


if __name__ == "__main__":
    sys.exit(main())
