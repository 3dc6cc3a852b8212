"""N worker processes race the same schedules over many fire times: exactly one job per fire time.

Each schedule fires every second with catch-up ``all_within(1h)``; the test
puts the next fire times back (60-90 s of downtime) once every worker is up, so
hundreds of fire times are due at once and the workers race
for them (five fire times per transaction), while new ones keep coming due
every second.  The invariant is checked after the workers stop: the fired
fire times of each schedule are exactly the consecutive seconds from the
first to the last, each with one job, and there are no other jobs.
"""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from datetime import timedelta

import pytest
import sqlalchemy as sa
from periodic_app import PERIOD, race_queue
from support.paths import APPS
from support.periodic import aligned, db_now, fire_times, jobs_of
from support.processes import Procs
from support.waiting import wait_until

import alembic_venturi
from venturi_sa import Models, make_models
from venturi_sa.devtools.throwaway import ThrowawayCluster
from venturi_sa.periodic import reconcile

pytestmark = [pytest.mark.timeout(120)]
APP = APPS / "periodic_app.py"
WORKERS = 4
SURVIVORS = 2  # with kill: processes racing beside the WORKERS that SIGKILL themselves
SCHEDULES = 4
BACKLOG = timedelta(seconds=90)  # 4 schedules x 90 s: >= 360 fire times due at once, and more as the race runs
SHORT_BACKLOG = timedelta(seconds=60)  # >= 240 fire times (with SIGKILLs / a restart in the middle)


def fired(proc: subprocess.Popen[str]) -> int:
    """Wait for ``proc`` to exit; the number of jobs it fired (it prints it on exit), -1 if it was killed."""
    out, _ = proc.communicate(timeout=30)
    lines = [line for line in out.splitlines() if line.startswith("FIRED")]
    return int(lines[0].split()[2]) if lines else -1


def connected(engine: sa.Engine, prefix: str) -> int:
    with engine.connect() as conn:
        return int(conn.execute(sa.text("SELECT count(DISTINCT client_port) FROM pg_stat_activity "
                                        "WHERE application_name = :a"), {"a": f"periodic-{prefix}"}).scalar_one())


def race(engine: sa.Engine, models: Models, pg_url: str, kill: bool, backlog: timedelta,
         midway: Callable[[], None] | None = None) -> int:
    """Run the race; returns how many workers were SIGKILLed mid-fire.

    ``WORKERS`` processes race; with ``kill`` each of them SIGKILLs itself in its fire
    number ``1 + i`` (the race goes on until all of them did) while ``SURVIVORS`` more
    processes, started with them, race on to the end.  ``midway`` is called once the first
    fires have committed.
    """
    reconcile(race_queue(models.prefix, SCHEDULES), engine)
    with engine.begin() as conn:  # paused while the workers start (reconciliation keeps them paused)
        conn.execute(sa.update(models.schedules_table).values(paused=True))
    procs = Procs(APP, pg_url, models.prefix)
    try:
        return _race(engine, models, procs, kill, backlog, midway)
    finally:
        procs.cleanup()


def _race(engine: sa.Engine, models: Models, procs: Procs, kill: bool, backlog: timedelta,
          midway: Callable[[], None] | None) -> int:
    kill_at = [1 + i for i in range(WORKERS)] + [0] * SURVIVORS if kill else [0] * WORKERS
    workers = [procs.spawn(schedules=SCHEDULES, kill_at=k) for k in kill_at]
    t0 = time.monotonic()
    for proc in workers:
        procs.ready(proc)
    wait_until(lambda: connected(engine, models.prefix) >= 2 * len(workers), what="every worker connected")
    print(f"{len(workers)} workers up in {time.monotonic() - t0:.1f}s")
    start = aligned(db_now(engine), PERIOD) - backlog
    with engine.begin() as conn:  # the backlog of downtime comes due at once, for every worker
        conn.execute(sa.update(models.schedules_table).values(next_at=start, paused=False))
    caught_up_after = db_now(engine)

    def behind() -> int:
        with engine.connect() as conn:
            return int(conn.execute(sa.select(sa.func.count()).where(
                models.schedules_table.c.next_at <= caught_up_after)).scalar_one())

    def killed() -> int:
        return sum(1 for proc in workers if proc.poll() is not None)

    t0 = time.monotonic()
    try:
        if midway is not None:
            wait_until(lambda: fire_times(engine, models, "tick-0"), what="the first fires")
            midway()
            assert behind() > 0, "the race was over before the midway event; give it more fire times"
        wait_until(lambda: behind() == 0 and killed() == sum(1 for k in kill_at if k), timeout=60,
                   what="every schedule caught up (and every killer dead)")
    finally:
        t1 = time.monotonic()
        for proc in workers:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        jobs = [fired(p) for p in workers]
    print(f"caught up in {t1 - t0:.1f}s, stopped in {time.monotonic() - t1:.1f}s")
    for proc, k in zip(workers, kill_at, strict=True):
        assert proc.returncode == (-signal.SIGKILL if k else 0), (k, proc.returncode)
    assert sum(1 for n in jobs if n > 0) >= 2 or kill, f"no race: jobs fired per process {jobs}"
    check_exactly_once(engine, models, start, backlog)
    print(f"jobs fired per process (-1: SIGKILLed): {jobs}")
    return sum(1 for proc in workers if proc.returncode == -signal.SIGKILL)


def check_exactly_once(engine: sa.Engine, models: Models, start: object, backlog: timedelta) -> None:
    jobs = jobs_of(engine, models)
    assert len({job.id for job in jobs}) == len(jobs)
    total = 0
    for i in range(SCHEDULES):
        times = fire_times(engine, models, f"tick-{i}")
        expected = [start + PERIOD * k for k in range(len(times))]  # type: ignore[operator]
        assert times == expected, f"tick-{i}: fire times are not the consecutive seconds from the start"
        assert len(times) >= backlog / PERIOD
        assert sum(1 for job in jobs if job.payload == {"n": i}) == len(times)  # one job per fire time
        total += len(times)
    assert len(jobs) == total
    print(f"race: {WORKERS} workers, {SCHEDULES} schedules, {total} fire times, {len(jobs) - total} duplicates")


def test_four_worker_processes_fire_each_fire_time_exactly_once(engine: sa.Engine, models: Models,
                                                                pg_url: str) -> None:
    race(engine, models, pg_url, kill=False, backlog=BACKLOG)


def test_workers_sigkilled_mid_fire_lose_and_duplicate_nothing(engine: sa.Engine, models: Models,
                                                               pg_url: str) -> None:
    killed = race(engine, models, pg_url, kill=True, backlog=SHORT_BACKLOG)
    assert killed == WORKERS
    print(f"race with SIGKILL mid-fire: {killed} of {WORKERS + SURVIVORS} workers killed")


@pytest.fixture(scope="module")
def own_cluster() -> Iterator[ThrowawayCluster]:
    """A PostgreSQL of this module's own, which a test restarts."""
    with ThrowawayCluster({"fsync": "off", "synchronous_commit": "off", "max_connections": "200"}) as cluster:
        yield cluster


def test_a_postgres_restart_mid_race_loses_and_duplicates_nothing(own_cluster: ThrowawayCluster) -> None:
    engine = sa.create_engine(own_cluster.url, pool_pre_ping=True, connect_args={"options": "-c timezone=UTC"})
    try:
        prefix = "restart_race"
        alembic_venturi.upgrade(engine, prefix)
        race(engine, make_models(prefix), own_cluster.url, kill=False, backlog=SHORT_BACKLOG,
             midway=lambda: own_cluster.pg_ctl("restart", "-m", "fast"))
    finally:
        engine.dispose()
