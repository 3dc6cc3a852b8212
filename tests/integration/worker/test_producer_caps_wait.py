"""Round 3, defect 5: with every kind at its ``Task.concurrency`` cap, the producer waits for a freed slot."""

from __future__ import annotations

import threading
import time
from typing import Any

import sqlalchemy as sa
from support.probes import running
from support.waiting import Events
from support.workers import enqueue

from venturi_sa import JobContext, Queue, Task, Worker

WINDOW = 1.0  # seconds of watching the worker's CPU while every kind is at its cap


# Regression test of round 3's defect 5: failed on 748cf08 (the producer spun through claim rounds that built
# no statement, about one CPU second a second).
def test_the_producer_waits_while_every_kind_is_at_its_cap(engine: sa.Engine, models: Any) -> None:
    gate = threading.Event()

    class Capped(Task):
        KIND = "capped"
        concurrency = 1

        def run(self, ctx: JobContext) -> None:
            gate.wait(20)

    queue = Queue(models, [Capped])
    enqueue(engine, queue, Capped(), Capped())
    rounds: list[int] = []

    def count(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if "SKIP LOCKED" in statement and "UPDATE" in statement:
            rounds.append(1)

    events = Events()
    worker_engine = sa.create_engine(engine.url)
    sa.event.listen(worker_engine, "before_cursor_execute", count)
    worker = Worker(queue, worker_engine, concurrency=4, poll_interval=2.0, listen=False, on_event=events)
    try:
        with running(worker):
            events.wait_for("claimed")
            before, cpu = len(rounds), time.process_time()
            gate.wait(WINDOW)  # the one capped job runs; the other waits for its slot
            during, cpu = len(rounds) - before, time.process_time() - cpu
            gate.set()
            events.wait_count("finished", 2)
    finally:
        gate.set()
        worker_engine.dispose()
    assert during <= 3, f"{during} claim statements in {WINDOW}s while the only kind was at its cap"
    assert cpu < WINDOW / 3, f"{cpu:.2f}s of CPU in {WINDOW}s while the only kind was at its cap and its job waited"
