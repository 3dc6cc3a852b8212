"""Caller transactions holding ``after=``, ``signal`` and ``cancel`` locks on running jobs for several leases.

Two workers with 1-second leases run long jobs while six caller transactions
hold their rows (two of each kind) for more than two leases.  Meanwhile every
long job's lease is renewed, a stream of other jobs is claimed and completed,
and when it is over every job ran exactly once: each handler records its run
in a table of its own, outside ``ctx.session``, so a second run of a job
that was recovered while still running would be counted too.
"""

from __future__ import annotations

import threading
from contextlib import ExitStack
from datetime import datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.orm import Session
from support.control import watched
from support.waiting import WAIT, wait_until
from support.workers import enqueue

from venturi_sa import JobContext, Queue, Task

pytestmark = pytest.mark.timeout(90)

LEASE = timedelta(seconds=1)
HELD = {"after": 2, "signal": 2, "cancel": 2}
QUICK = 60


def _record(engine: sa.Engine, table: str, ctx: JobContext) -> None:
    with engine.begin() as conn:  # its own transaction: counted whatever becomes of the run
        conn.execute(sa.text(f"INSERT INTO {table} (job_id, run_no) VALUES (:j, :r)"),
                     {"j": ctx.job_id, "r": ctx.run_count})


def _runs(engine: sa.Engine, table: str) -> list[tuple[str, int]]:
    with engine.connect() as conn:
        return [(r[0], r[1]) for r in conn.execute(sa.text(f"SELECT job_id, run_no FROM {table}"))]


def _leases(engine: sa.Engine, models: Any, ids: list[str]) -> list[datetime | None]:
    job = models.Job
    with engine.connect() as conn:
        return list(conn.execute(sa.select(job.claim_expires_at).where(job.id.in_(ids))).scalars())


def _count(engine: sa.Engine, models: Any, ids: list[str], status: str) -> int:
    job = models.Job
    with engine.connect() as conn:
        return int(conn.execute(sa.select(sa.func.count()).where(job.id.in_(ids), job.status == status)).scalar_one())


def test_caller_locks_held_for_leases_neither_run_a_job_twice_nor_stall_claims(engine: sa.Engine, models: Any,
                                                                              prefix: str) -> None:
    table = f"{prefix}_runs"
    with engine.begin() as conn:
        conn.execute(sa.text(f"CREATE TABLE {table} (job_id text NOT NULL, run_no int NOT NULL)"))
    release = threading.Event()
    started = threading.Semaphore(0)
    long_count = sum(HELD.values())

    class Long(Task):
        KIND = "long"
        lease = LEASE

        def run(self, ctx: JobContext) -> None:
            _record(engine, table, ctx)
            started.release()
            while not release.wait(0.02) and not ctx.cancelled:  # a cancelled run stops early
                pass

    class Quick(Task):
        KIND = "quick"
        lease = LEASE

        def run(self, ctx: JobContext) -> None:
            _record(engine, table, ctx)

    class After(Task):
        KIND = "after"
        lease = LEASE

        def run(self, ctx: JobContext) -> None:
            _record(engine, table, ctx)

    queue = Queue(models, [Long, Quick, After])
    options = {"concurrency": long_count, "recover_interval": 0.1, "poll_interval": 0.05}
    with watched(queue, engine, **options), watched(queue, engine, **options):
        longs = enqueue(engine, queue, *[Long() for _ in range(long_count)])
        for _ in longs:
            assert started.acquire(timeout=WAIT)
        kinds = [kind for kind, n in HELD.items() for _ in range(n)]
        with ExitStack() as stack:
            callers = [stack.enter_context(Session(engine)) for _ in longs]
            for caller in callers:
                stack.enter_context(caller.begin())
            for caller, kind, job_id in zip(callers, kinds, longs, strict=True):
                if kind == "after":
                    queue.enqueue(caller, After(), after=[job_id])
                elif kind == "signal":
                    queue.signal(caller, job_id, "go")
                else:
                    queue.cancel(caller, job_id)
            locked_at: datetime = callers[-1].execute(sa.select(sa.func.clock_timestamp())).scalar_one()
            # While every lock is held: other jobs are claimed and completed ...
            quick = enqueue(engine, queue, *[Quick() for _ in range(QUICK)])
            wait_until(lambda: _count(engine, models, quick, "completed") == QUICK, timeout=30,
                       what="the quick jobs to complete while the callers hold their locks")
            # ... and the long jobs keep their leases for more than two leases.
            wait_until(lambda: all(e is not None and e > locked_at + 2 * LEASE
                                   for e in _leases(engine, models, longs)),
                       timeout=6 * LEASE.total_seconds() + 5, what="renewals past two leases under the locks")
            assert _count(engine, models, longs, "claimed") == long_count
        # The callers committed: the cancelled runs stop, then the others are let go.
        cancelled = [job_id for kind, job_id in zip(kinds, longs, strict=True) if kind == "cancel"]
        wait_until(lambda: _count(engine, models, cancelled, "dead") == len(cancelled), what="the cancelled runs")
        release.set()
        wait_until(lambda: _count(engine, models, longs, "completed") == long_count - len(cancelled),
                   what="the long jobs to complete")
        wait_until(lambda: len(_runs(engine, table)) == long_count + QUICK + HELD["after"],
                   what="the dependents to run")
    runs = _runs(engine, table)
    assert all(run_no == 1 for _, run_no in runs), [r for r in runs if r[1] != 1]
    assert len({job_id for job_id, _ in runs}) == len(runs)  # no job ran twice
    with engine.connect() as conn:
        recovered = conn.execute(sa.select(sa.func.count()).select_from(models.journal_table).where(
            models.journal_table.c.outcome == "stale_recovered")).scalar_one()
    assert recovered == 0
