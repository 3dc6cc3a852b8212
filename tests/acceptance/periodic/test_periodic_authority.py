"""Reconcile authority: a worker judges only the stored schedules of the kinds its queue registers.

Two services sharing a prefix (different kind sets) each declare their own
schedules; neither removes the other's, and a worker that knows none of the
stored schedules' kinds changes nothing.
"""

from __future__ import annotations

import signal
from datetime import timedelta

import sqlalchemy as sa
from support.paths import APPS
from support.periodic import Tick, Tock
from support.processes import PROCESS_WAIT, Procs
from support.waiting import wait_until

from venturi_sa import JobContext, Models, Queue, Task
from venturi_sa.periodic import Reconciled, reconcile

APP = APPS / "periodic_app.py"
HOURLY = {"period": 3600}  # nothing comes due while the test runs


class Other(Task):
    KIND = "other"

    def run(self, ctx: JobContext) -> None:
        return None


def stored(engine: sa.Engine, models: Models) -> dict[str, bool]:
    """Every stored schedule: name -> live (not removed)."""
    table = models.schedules_table
    with engine.connect() as conn:
        return {row.name: row.removed_at is None for row in conn.execute(sa.select(table.c.name, table.c.removed_at))}


def test_worker_processes_of_other_kinds_sharing_a_prefix_keep_each_others_schedules(
        engine: sa.Engine, models: Models, pg_url: str) -> None:
    """A tick service and a tock service start together (either may reconcile first), then both redeploy."""
    procs = Procs(APP, pg_url, models.prefix)
    try:
        first = [procs.spawn(kind="tick", schedules=2, **HOURLY), procs.spawn(kind="tock", schedules=2, **HOURLY)]
        for proc in first:
            procs.ready(proc)
        wait_until(lambda: stored(engine, models) == {"tick-0": True, "tick-1": True, "tock-0": True,
                                                      "tock-1": True}, what="both services reconciled")
        assert all(proc.poll() is None for proc in first)  # side by side, neither removed the other's

        for proc in first:  # the next deploys: tick declares one schedule fewer, tock declares none
            proc.send_signal(signal.SIGTERM)
        for proc in first:
            proc.wait(PROCESS_WAIT)
        for proc in [procs.spawn(kind="tick", schedules=1, **HOURLY), procs.spawn(kind="tock", **HOURLY)]:
            procs.ready(proc)
        wait_until(lambda: stored(engine, models) == {"tick-0": True, "tick-1": False, "tock-0": False,
                                                      "tock-1": False}, what="each removed its own kind's only")
    finally:
        procs.cleanup()


def test_reconcile_reports_only_the_removals_of_registered_kinds(engine: sa.Engine, models: Models) -> None:
    both = Queue(models, [Tick, Tock])
    both.schedule(Tick(n=1), every=timedelta(hours=1), name="tick-a")
    both.schedule(Tock(n=1), every=timedelta(hours=1), name="tock-a")
    assert sorted(reconcile(both, engine).added) == ["tick-a", "tock-a"]

    unrelated = Queue(models, [Other])  # no registered kind has a schedule and it declares none: nothing
    before = stored(engine, models)
    assert reconcile(unrelated, engine) == Reconciled()
    assert stored(engine, models) == before == {"tick-a": True, "tock-a": True}

    ticks = Queue(models, [Tick, Other])  # knows tick, declares none: tick-a removed and reported, tock-a kept
    assert reconcile(ticks, engine) == Reconciled(removed=["tick-a"])
    assert stored(engine, models) == {"tick-a": False, "tock-a": True}
    assert reconcile(ticks, engine) == Reconciled()  # already removed: not reported again
