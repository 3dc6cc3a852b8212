"""In-process faults: races, poison rows, hostile handlers, lock hygiene, start/stop churn."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import fault_app
import pytest
import sqlalchemy as sa
from sqlalchemy.orm import Session
from support.reliability import Probe, enqueue
from support.waiting import wait_until as wait_for

from venturi_sa import Queue, UnknownKind, Worker
from venturi_sa.devtools.throwaway import ThrowawayCluster
from venturi_sa.states import Outcome
from venturi_sa.storage import claim as claims
from venturi_sa.storage import recovery
from venturi_sa.storage.outcomes import finish
from venturi_sa.storage.params import ClaimParams, FinishParams, RecoverParams


@pytest.fixture
def engine_for(cluster: ThrowawayCluster) -> Iterator[Any]:
    """``engine_for(name)``: a worker engine whose backends carry ``application_name = name``."""
    made: list[sa.Engine] = []

    def make(name: str) -> sa.Engine:
        made.append(fault_app.make_engine(cluster.url, name, pool_size=10))
        return made[-1]

    yield make
    for eng in made:
        eng.dispose()


class Background:
    """``Worker.run()`` on a thread; ``stop()`` joins it."""

    def __init__(self, worker: Worker) -> None:
        self.worker = worker
        self.thread = threading.Thread(target=worker.run, name="rel-worker-runner", daemon=True)
        self.thread.start()

    def stop(self, timeout: float = 30) -> None:
        self.worker.stop()
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "the worker did not stop"


# -- 5. recovery vs completion race ------------------------------------------------------------
def _race(db: sa.Engine, queue: Queue, claimed: list[Any], at: float) -> None:
    """Complete every claimed run from monotonic time ``at`` on while another thread keeps recovering."""
    models, start, done = queue.models, threading.Barrier(2), threading.Event()
    recover = RecoverParams(max_failures={"work": 10})

    def complete() -> None:
        start.wait()
        time.sleep(max(0.0, at - time.monotonic()))
        for job in claimed:
            with Session(db) as s, s.begin():
                finish(models, s, FinishParams(fence=job.fence, outcome=Outcome.COMPLETED))
        done.set()

    def recoverer() -> None:
        start.wait()
        while not done.is_set():
            with Session(db) as s, s.begin():
                recovery.recover(models, s, recover)
        with Session(db) as s, s.begin():
            recovery.recover(models, s, recover)

    threads = [threading.Thread(target=complete), threading.Thread(target=recoverer)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)


def test_recovery_and_completion_race_never_both(db: sa.Engine, queue: Queue, probe: Probe) -> None:
    """Outcomes written as leases expire, against a recoverer: each run ends one way, never both.

    The completions start at offsets around the lease's end, counted from the claim (so a slow machine
    shifts nothing); should every run of the planned rounds still end the same way, rounds with earlier
    or later starts follow (at most six) until the race has gone both ways.
    """
    lease = timedelta(milliseconds=300)
    ends = {"completed": 0, "recovered": 0}
    planned = [0.25, 0.29, 0.30, 0.31, 0.35]
    rounds = 0
    while planned or (not (ends["completed"] and ends["recovered"]) and rounds < 11):
        offset = planned.pop(0) if planned else (0.05 if not ends["completed"] else 0.6)
        rounds += 1
        enqueue(db, queue, [{"n": i} for i in range(40)])
        with Session(db) as s, s.begin():
            claimed = claims.claim(queue.models, s, ClaimParams(
                worker_id="racer", kinds=["work"], limit=40, leases={"work": lease}, default_lease=lease))
        claimed_at = time.monotonic()  # the leases started a little before: at the claim's now()
        assert len(claimed) == 40
        _race(db, queue, claimed, claimed_at + offset)
        for job in claimed:
            journal = [o for _, o in probe.journal(job.id)]
            status = probe.job(job.id).status
            assert (journal, status) in ((["completed"], "completed"), (["stale-recovered"], "pending")), journal
            ends["completed" if status == "completed" else "recovered"] += 1
        # The recovered ones rerun and complete exactly once.
        Worker(queue, db, concurrency=4, listen=False, poll_interval=0.1).run_until_idle()
    assert probe.statuses() == {"completed": 40 * rounds}
    assert probe.scalar("SELECT count(*) FROM {p}_journal WHERE outcome = 'completed'") == 40 * rounds
    assert ends["completed"] and ends["recovered"], ends  # the race really went both ways
    print(f"METRIC race: {ends} in {rounds} rounds")


# -- 11. bad stored payloads and unknown kinds -------------------------------------------------
def test_bad_stored_payloads_and_unknown_kinds(db: sa.Engine, queue: Queue, probe: Probe) -> None:
    """Rows inserted behind venturi's back: poison ends dead with a clear note; the rest is processed."""
    bad = {"not an object": [1, 2], "null": None, "failing schema": {"n": "abc"},
           "unknown field": {"bogus": 1}}
    good = {"huge": {"mode": "x" * 2_000_000}, "normal": {"n": 1}}
    ids: dict[str, str] = {}
    with Session(db) as s, s.begin():
        for label, payload in {**bad, **good}.items():
            job = queue.models.Job(kind="work", payload=payload)  # None: JSON null
            s.add(job)
            s.flush()
            ids[label] = job.id
        stranger = queue.models.Job(kind="somebody_elses_kind", payload={})
        s.add(stranger)
        s.flush()
        stranger_id = stranger.id
    processed = Worker(queue, db, concurrency=2, listen=False, poll_interval=0.1).run_until_idle()
    assert processed == len(bad) + len(good)
    for label in bad:
        row = probe.job(ids[label])
        assert (row.status, row.run_count) == ("dead", 1), label
        (entry,) = probe.rows("SELECT outcome, note FROM {p}_journal WHERE job_id = :j", j=ids[label])
        assert entry.outcome == "dead" and "cannot be decoded" in entry.note, (label, entry.note)
    notes = {label: probe.scalar("SELECT note FROM {p}_journal WHERE job_id = :j", j=ids[label]) for label in bad}
    assert "list" in notes["not an object"]
    assert "n" in notes["failing schema"] and "bogus" in notes["unknown field"]
    for label in good:
        assert probe.job(ids[label]).status == "completed", label
    # A kind this deployment does not know is left alone for the one that does.
    row = probe.job(stranger_id)
    assert (row.status, row.run_count) == ("pending", 0)
    with pytest.raises(UnknownKind, match="somebody_elses_kind"):
        Worker(queue, db, kinds=["somebody_elses_kind"])


# -- 12. hostile handlers ------------------------------------------------------------------------
def test_hostile_handlers_never_deadlock_or_leak_a_slot(cluster: ThrowawayCluster, db: sa.Engine,
                                                        rel_prefix: str, probe: Probe, engine_for: Any) -> None:
    """BaseException subclasses, junk return values, a poisoned session, blocking past the lease."""
    queue = fault_app.build_queue(rel_prefix, db, lease=1, max_failures=2)
    hostile = ["raise_SystemExit", "raise_GeneratorExit", "raise_ValueError", "return_junk", "poison_session"]
    # (KeyboardInterrupt stops the worker, as Ctrl-C would: tests/integration/worker/test_poison.py)
    ids = dict(zip(hostile, enqueue(db, queue, [{"mode": m} for m in hostile]), strict=True))
    (blocker,) = enqueue(db, queue, [{"mode": "sleep", "sleep": 2.5}])  # 2.5 x its 1 s lease
    bg = Background(Worker(queue, engine_for("venturi-hostile"), concurrency=2, poll_interval=0.2,
                           listen=False, recover_interval=0.3))
    try:
        wait_for(lambda: probe.count("pending") + probe.count("claimed") == 0, 60, "every hostile job to end")
        for mode in hostile:
            journal = [o for _, o in probe.journal(ids[mode])]
            expected = ["completed"] if mode == "return_junk" else ["retried", "dead"]
            assert journal == expected, (mode, journal)  # a result JSON cannot store still completes
        assert "set" in probe.scalar("SELECT string_agg(note, ' ') FROM {p}_journal WHERE job_id = :j",
                                     j=ids["return_junk"])
        assert "could not commit" in probe.scalar(
            "SELECT string_agg(note, ' ') FROM {p}_journal WHERE job_id = :j", j=ids["poison_session"])
        assert probe.journal(blocker) == [(1, "completed")]  # renewed while it blocked; never recovered
        # Both slots still work: two jobs that only finish when both are running at once.
        pair = enqueue(db, queue, [{"mode": "wait_event", "sleep": 30} for _ in range(2)])
        wait_for(lambda: all(probe.side(j) for j in pair), 15, "both slots to run at once")
        for job_id in pair:
            fault_app.WAITERS.setdefault(job_id, threading.Event()).set()
        wait_for(lambda: all(probe.job(j).status == "completed" for j in pair), 15, "the pair to complete")
    finally:
        bg.stop()


# -- 13. lock hygiene ----------------------------------------------------------------------------
def test_outside_row_locks_do_not_block_claims(db: sa.Engine, queue: Queue, probe: Probe) -> None:
    """An outside transaction holding FOR UPDATE on some rows: the others are processed (SKIP LOCKED)."""
    ids = enqueue(db, queue, [{"n": i} for i in range(50)])
    locked = ids[::5]
    with db.connect() as holder:
        holder.execute(sa.text(f"SELECT id FROM {queue.prefix}_jobs WHERE id = ANY(:ids) FOR UPDATE"),
                       {"ids": locked})
        processed = Worker(queue, db, concurrency=4, listen=False, poll_interval=0.1).run_until_idle()
        holder.rollback()
    assert processed == 40
    assert {r.id for r in probe.rows("SELECT id FROM {p}_jobs WHERE status = 'pending'")} == set(locked)
    assert Worker(queue, db, concurrency=4, listen=False).run_until_idle() == 10


def test_no_transaction_held_while_handlers_run(db: sa.Engine, rel_prefix: str, queue: Queue,
                                                probe: Probe, engine_for: Any) -> None:
    """While handlers block, the only old open transaction of the worker is the ctx.session one."""
    name = "venturi-hygiene"
    plain, with_session = enqueue(db, queue, [{"mode": "wait_event"}, {"mode": "biz_wait_event"}])
    bg = Background(Worker(queue, engine_for(name), concurrency=3, poll_interval=0.2, listen=True))
    try:
        wait_for(lambda: probe.scalar("SELECT count(*) FROM {p}_side WHERE started_at < now() - "
                                      "interval '1 second'") == 2, 20, "both handlers blocked for 1 s")
        with db.connect() as conn:
            conn.execute(sa.text("SELECT pg_sleep(0.3)"))  # let renewals run meanwhile
        old = probe.rows("SELECT pid, state, query FROM pg_stat_activity WHERE application_name = :n "
                         "AND xact_start < clock_timestamp() - interval '0.5 second'", n=name)
        assert len(old) == 1, old
        assert "biz" in old[0].query and old[0].state.startswith("idle in transaction")
    finally:
        for job_id in (plain, with_session):
            fault_app.WAITERS.setdefault(job_id, threading.Event()).set()
        bg.stop()
    assert probe.statuses() == {"completed": 2}


def test_claim_uses_partial_claim_indexes(db: sa.Engine, queue: Queue) -> None:
    """EXPLAIN of the claim statement on a realistic table shows the partial claim index."""
    enqueue(db, queue, [{"n": i} for i in range(3000)])
    with Session(db) as s, s.begin():
        claims.claim(queue.models, s, ClaimParams(worker_id="x", kinds=["work"], limit=2900,
                                                  leases={}, default_lease=timedelta(seconds=60)))
    params = ClaimParams(worker_id="x", kinds=["work"], limit=10, leases={},
                         default_lease=timedelta(seconds=60))
    with db.connect() as conn:
        conn.exec_driver_sql(f"ANALYZE {queue.prefix}_jobs")
        plan = claims.explain_claim(conn, queue.models, params)
        conn.rollback()
    assert f"{queue.prefix}_jobs_claim" in plan, plan


# -- 14. start/stop stress -----------------------------------------------------------------------
def _venturi_threads() -> list[str]:
    """Threads of workers.  The process's async worker loop (``venturi-loop``) is a deliberate
    singleton, shared by every worker of the process and kept between them (worker/loop.py)."""
    return [t.name for t in threading.enumerate() if t.name.startswith("venturi-") and t.name != "venturi-loop"]


@pytest.mark.slow
def test_start_stop_stress_leaks_nothing(db: sa.Engine, queue: Queue, probe: Probe, engine_for: Any) -> None:
    """Many start/stop cycles of three workers at once: threads and connections back to baseline."""
    name = "venturi-churn"
    eng = engine_for(name)
    baseline = set(threading.enumerate())
    assert not _venturi_threads()
    for cycle in range(12):
        if cycle % 3 == 0:
            enqueue(db, queue, [{"n": i} for i in range(6)])
        started = [threading.Event() for _ in range(3)]

        def hook(ready: threading.Event) -> Any:
            return lambda event, data: ready.set() if event in ("idle", "claimed") else None

        bgs = [Background(Worker(queue, eng, concurrency=2, poll_interval=0.2, listen=i != 0,
                                 on_event=hook(started[i]), worker_id=f"churn-{i}")) for i in range(3)]
        for ev in started:
            assert ev.wait(20)
        for bg in bgs:
            bg.stop()
    wait_for(lambda: not _venturi_threads(), 10, f"worker threads to end: {_venturi_threads()}")
    assert {t for t in threading.enumerate() if t.name != "venturi-loop"} <= baseline
    assert eng.pool.checkedout() == 0
    live = probe.scalar("SELECT count(*) FROM pg_stat_activity WHERE application_name = :n", n=name)
    assert live <= eng.pool.size(), live  # idle pooled connections only, no leaked LISTEN sockets
    eng.dispose()
    wait_for(lambda: probe.scalar("SELECT count(*) FROM pg_stat_activity WHERE application_name = :n",
                                  n=name) == 0, 10, "every connection of the workers to close")
    assert probe.count("claimed") == 0
