"""Owed ``on_dead`` rows of kinds whose task has no ``on_dead``: a worker of the kind deletes them, so the job
is archived; a kind with the hook still gets its call, exactly once."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.orm import Session, sessionmaker
from support.queues import drain
from support.waiting import wait_until
from support.workers import enqueue, running

from venturi_sa import Die, JobContext, Queue, Task, Worker
from venturi_sa.storage import claim as claims
from venturi_sa.storage import recovery
from venturi_sa.storage.params import ClaimParams, RecoverParams
from venturi_sa.worker.outcome_hooks import OutcomeContext
from venturi_sa.worker.owed_calls import OwedCaller

hooked: list[str] = []


@pytest.fixture(autouse=True)
def _reset() -> None:
    hooked.clear()


class Doomed(Task):
    KIND = "doomed"

    def run(self, ctx: JobContext) -> Any:
        return Die("no luck")


class Quiet(Task):
    """A dependent whose task declares no ``on_dead``."""

    KIND = "quiet"
    max_failures = 1

    def run(self, ctx: JobContext) -> None:
        return None


class Loud(Task):
    """A dependent whose task declares ``on_dead``: the call is owed to a worker of its kind."""

    KIND = "loud"

    def run(self, ctx: JobContext) -> None:
        return None

    def on_dead(self, ctx: OutcomeContext, note: str | None) -> None:
        hooked.append(ctx.job_id)


def owed_rows(engine: sa.Engine, models: Any) -> list[tuple[str, str]]:
    t = models.on_dead_table
    with engine.connect() as conn:
        return [(r.job_id, r.kind) for r in conn.execute(sa.select(t.c.job_id, t.c.kind).order_by(t.c.id))]


def archived(engine: sa.Engine, models: Any) -> set[str]:
    with engine.connect() as conn:
        return set(conn.execute(sa.select(models.archive_table.c.id)).scalars())


def stale_claim(engine: sa.Engine, models: Any, kind: str) -> None:
    """A claim of ``kind`` whose worker is gone: its lease has expired."""
    with Session(engine) as s, s.begin():
        claims.claim(models, s, ClaimParams(worker_id="gone:1", kinds=[kind], limit=10, leases={},
                                            default_lease=timedelta(minutes=5)))
    with engine.begin() as conn:
        jobs = models.jobs_table
        conn.execute(sa.update(jobs).where(jobs.c.kind == kind, jobs.c.status == "claimed")
                     .values(claim_expires_at=sa.func.now() - timedelta(seconds=1)))


def test_a_worker_drops_the_owed_rows_of_its_kinds_without_on_dead_and_the_jobs_are_archived(
        engine: sa.Engine, models: Any) -> None:
    queue = Queue(models, [Doomed, Quiet, Loud], archive_after=timedelta(0))
    [stuck] = enqueue(engine, queue, Quiet())
    stale_claim(engine, models, "quiet")  # recovered dead at its backstop (max_failures=1) by the worker below
    [parent] = enqueue(engine, queue, Doomed())
    [quiet] = enqueue(engine, queue, Quiet(), after=[parent])  # killed by its dead parent
    [loud] = enqueue(engine, queue, Loud(), after=[parent])
    worker = Worker(queue, engine, recover_interval=0.1, poll_interval=0.1)
    with running(worker):
        everything = {stuck, parent, quiet, loud}
        wait_until(lambda: archived(engine, models) >= everything, what="every job archived")
    assert owed_rows(engine, models) == []
    assert hooked == [loud]  # made once, by the worker of its kind
    assert queue.get_job(engine, quiet).status == "dead" and queue.get_job(engine, stuck).status == "dead"


def test_one_pass_drops_hookless_rows_in_bulk_and_makes_each_hooked_call_once(
        engine: sa.Engine, models: Any) -> None:
    queue = Queue(models, [Doomed, Quiet, Loud], archive_after=None)
    parents = enqueue(engine, queue, *[Doomed() for _ in range(3)])
    quiet = enqueue(engine, queue, *[Quiet() for _ in range(2000)], after=parents[:1])
    loud = [enqueue(engine, queue, Loud(), after=[p])[0] for p in parents]
    [stuck] = enqueue(engine, queue, Quiet())
    drain(queue, engine, kinds=["doomed"])
    stale_claim(engine, models, "quiet")
    with Session(engine) as s, s.begin():
        [recovered] = recovery.recover(models, s, RecoverParams(max_failures={"quiet": 1}))
    assert (recovered.id, recovered.dead) == (stuck, True)
    assert len(owed_rows(engine, models)) == 2000 + 3 + 1

    caller = OwedCaller(models, queue.registry, ["quiet", "loud"], sessionmaker(engine), every=1.0,
                        stopping=threading.Event())
    assert caller.make_due() == 2000 + 1 + 3
    assert owed_rows(engine, models) == [] and sorted(hooked) == sorted(loud)
    assert caller.make_due() == 0 and sorted(hooked) == sorted(loud)  # nothing made twice
    assert queue.archive(engine) == 3 + 2000 + 3 + 1
    assert archived(engine, models) >= {stuck, *quiet, *loud}
