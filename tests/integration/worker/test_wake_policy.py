"""Defect 13: the producer wakes for the soonest visible_at and for every freed slot (SPEC §5).

Latency bounds, not benchmarks: generous, but well below the defect's 2-3 s
(the poll interval is 3 s).
"""

from __future__ import annotations

import threading
import time
from datetime import timedelta
from typing import Any

import sqlalchemy as sa
from marshmallow import Schema, fields
from support.probes import running
from support.waiting import Events
from support.workers import enqueue

from venturi_sa import JobContext, Queue, Task, Worker

POLL = 3.0
BOUND = 0.75  # seconds


class Numbered(Schema):
    n = fields.Integer(required=True)


# Regression test of defect 13 (worker hardening issue): failed on e53c386.
def test_delayed_job_is_claimed_when_it_becomes_visible_while_slots_are_free(engine: sa.Engine,
                                                                             models: Any) -> None:
    gate = threading.Event()

    class Long(Task):
        KIND = "long"

        def run(self, ctx: JobContext) -> None:
            gate.wait(20)

    class Later(Task):
        KIND = "later"

        def run(self, ctx: JobContext) -> None:
            pass

    queue = Queue(models, [Long, Later])
    events = Events()
    [long_id] = enqueue(engine, queue, Long())
    [later_id] = enqueue(engine, queue, Later(), delay=timedelta(seconds=1))
    try:
        with running(Worker(queue, engine, concurrency=4, poll_interval=POLL, listen=False, on_event=events)):
            events.wait_for("claimed", job_id=long_id)  # 1 of 4 slots busy, 3 free
            _, claimed = events.wait_for("claimed", job_id=later_id, timeout=10)
            gate.set()
    finally:
        gate.set()
    assert claimed["waited"] < BOUND, (
        f"the delayed job was claimed {claimed['waited']:.2f} s after its visible_at (database clock) "
        "while 3 of 4 slots were free")


# Regression test of defect 13 (worker hardening issue): failed on e53c386.
def test_a_freed_slot_is_refilled_promptly_under_a_backlog(engine: sa.Engine, models: Any) -> None:
    gates = [threading.Event() for _ in range(8)]
    returned: dict[int, float] = {}

    class Long(Task):
        KIND = "long"
        Payload = Numbered

        def run(self, ctx: JobContext) -> None:
            n = self.payload["n"]
            gates[n].wait(20)
            returned[n] = time.monotonic()

    queue = Queue(models, [Long])
    ids = enqueue(engine, queue, *[Long(n=n) for n in range(8)])
    events = Events()
    try:
        with running(Worker(queue, engine, concurrency=4, poll_interval=POLL, listen=False, on_event=events)):
            events.wait_count("claimed", 4)  # all four slots busy; four jobs wait
            first = [d["job_id"] for _, d in events.of("claimed")]
            n = ids.index(first[0])
            gates[n].set()  # one slot frees
            events.wait_count("claimed", 5, timeout=10)
            at = events.of("claimed")[4][0]
            for gate in gates:
                gate.set()
    finally:
        for gate in gates:
            gate.set()
    delay = at - returned[n]
    assert delay < BOUND, f"a freed slot sat idle {delay:.2f} s with a backlog waiting (poll interval {POLL} s)"
