"""Defect 3: stale recovery applies each kind's own backstop, also for kinds the worker does not run."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session
from support.factories import factories_for
from support.probes import running, settled
from support.workers import journal

from venturi_sa import JobContext, Queue, Task, Worker


class Thumbnails(Task):
    KIND = "thumbnails"

    def run(self, ctx: JobContext) -> None:
        pass


class ChargeCard(Task):
    KIND = "charge_card"
    max_failures = 1

    def run(self, ctx: JobContext) -> None:
        raise AssertionError("not run by this worker")


class ImportBig(Task):
    KIND = "import_big"
    max_failures = 25

    def run(self, ctx: JobContext) -> None:
        raise AssertionError("not run by this worker")


# Regression test of defect 3 (worker hardening issue): failed on e53c386.
def test_recovery_uses_the_backstop_of_kinds_the_worker_does_not_run(engine: sa.Engine, models: Any) -> None:
    queue = Queue(models, [Thumbnails, ChargeCard, ImportBig])
    with Session(engine) as session, session.begin():
        JobFactory, _ = factories_for(models, session)
        charge = JobFactory(expired=True, kind="charge_card", failure_count=0, run_count=1).id
        big = JobFactory(expired=True, kind="import_big", failure_count=4, run_count=5).id
    worker = Worker(queue, engine, kinds=["thumbnails"], poll_interval=0.2, listen=False, recover_interval=0.1)
    with running(worker):
        charge_row = settled(engine, models, charge, statuses=("pending", "dead"))
        big_row = settled(engine, models, big, statuses=("pending", "dead"))
    problems = []
    if (charge_row.status, charge_row.failure_count) != ("dead", 1):
        problems.append(f"charge_card (max_failures=1) recovered to {charge_row.status}, "
                        f"failure_count {charge_row.failure_count}; expected dead, 1")
    if (big_row.status, big_row.failure_count) != ("pending", 5):
        problems.append(f"import_big (max_failures=25, 4 failures) recovered to {big_row.status}, "
                        f"failure_count {big_row.failure_count}; expected pending, 5")
    assert not problems, "; ".join(problems)
    assert [e.outcome for e in journal(engine, models, charge)] == ["stale-recovered"]
    assert [e.outcome for e in journal(engine, models, big)] == ["stale-recovered"]
