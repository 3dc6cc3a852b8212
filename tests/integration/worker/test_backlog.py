"""Defect 10: while outcome writes stall, the worker stops running more jobs (bounded backlog)."""

from __future__ import annotations

import threading
from typing import Any

import sqlalchemy as sa
from support.probes import running, scalar
from support.waiting import Events
from support.workers import enqueue

from venturi_sa import JobContext, Queue, Task, Worker

CONCURRENCY = 4
BACKLOG = 16  # finished runs allowed to wait for their outcome write
JOBS = 400
BOUND = BACKLOG + 2 * CONCURRENCY  # the backlog, the runs holding slots, and one claim's worth more
STALL = 2.0  # seconds the outcome writes are held up


# Regression test of defect 10 (worker hardening issue): failed on e53c386.
def test_unpersisted_outcomes_stay_bounded_while_writes_stall(engine: sa.Engine, models: Any,
                                                               prefix: str) -> None:
    started = 0
    lock = threading.Lock()
    overflow = threading.Event()

    class Quick(Task):
        KIND = "quick"

        def run(self, ctx: JobContext) -> None:
            nonlocal started
            with lock:
                started += 1
                if started > BOUND:
                    overflow.set()

    queue = Queue(models, [Quick])
    enqueue(engine, queue, *[Quick() for _ in range(JOBS)])
    events = Events()
    worker = Worker(queue, engine, concurrency=CONCURRENCY, poll_interval=0.1, listen=False, on_event=events,
                    max_backlog=BACKLOG)
    with engine.connect() as holder:
        # every outcome write inserts a journal row: this lock stalls them all (claims are untouched)
        holder.execute(sa.text(f"LOCK TABLE {prefix}_journal IN EXCLUSIVE MODE"))
        with running(worker):
            overflowed = overflow.wait(STALL)
            with lock:
                during_stall = started
            holder.rollback()  # writes resume
            events.wait_count("finished", JOBS, timeout=15)
    assert not overflowed, (
        f"{during_stall} handlers started while no outcome could be written (concurrency {CONCURRENCY}, "
        f"bound {BOUND})")
    assert scalar(engine, f"SELECT count(*) FROM {prefix}_jobs WHERE status = 'completed'") == JOBS
    assert scalar(engine, f"SELECT count(*) FROM {prefix}_journal WHERE outcome = 'completed'") == JOBS
