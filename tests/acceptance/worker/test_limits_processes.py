"""Limits across real worker processes: never exceeded by 3 concurrent processes, fair across keys, changed at
runtime, and a SIGKILLed worker's claims stop counting once recovered.

Two witnesses per limit: a sampler thread counting the kind's claimed rows (per key too) while the workers
run, and the handlers' own spans (start and end on the database clock, inside the claim), whose overlaps can
never exceed what was claimed at once.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from typing import Any

import limits_app
import pytest
import sqlalchemy as sa
from support.processes import Procs, app_procs
from support.waiting import wait_until
from support.workers import enqueue

pytestmark = pytest.mark.timeout(120)
PROCESSES = 3


@pytest.fixture
def procs(pg_url: str, engine: sa.Engine, models: Any, prefix: str) -> Iterator[Procs]:
    yield from app_procs(limits_app, engine, pg_url, prefix)


class Sampler:
    """Counts claimed rows of ``kind`` (the most at once, overall and for any one key) until stopped."""

    def __init__(self, engine: sa.Engine, prefix: str, kind: str) -> None:
        self.engine, self.prefix, self.kind = engine, prefix, kind
        self.most = self.most_per_key = self.samples = 0
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        query = sa.text(f"SELECT count(*), coalesce(max(n), 0) FROM (SELECT k.key, count(*) AS n "
                        f"FROM {self.prefix}_jobs j LEFT JOIN {self.prefix}_limit_keys k ON k.job_id = j.id "
                        "WHERE j.kind = :kind AND j.status = 'claimed' GROUP BY k.key) per_key")
        total = sa.text(f"SELECT count(*) FROM {self.prefix}_jobs WHERE kind = :kind AND status = 'claimed'")
        with self.engine.connect() as conn:
            while not self.stopping.is_set():
                claimed = conn.execute(total, {"kind": self.kind}).scalar_one()
                _, per_key = conn.execute(query, {"kind": self.kind}).one()
                conn.rollback()
                self.most, self.most_per_key = max(self.most, claimed), max(self.most_per_key, per_key)
                self.samples += 1

    def __enter__(self) -> Sampler:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopping.set()
        self.thread.join(10)


def _done(engine: sa.Engine, prefix: str, kind: str) -> int:
    with engine.connect() as conn:
        return int(conn.execute(sa.text(f"SELECT count(*) FROM {prefix}_jobs WHERE kind = :k AND status = "
                                         "'completed'"), {"k": kind}).scalar_one())


def _overlap(engine: sa.Engine, prefix: str, kind: str, by_key: bool = False) -> int:
    """The most spans of ``kind`` (of one key, with ``by_key``) that overlapped at any moment."""
    with engine.connect() as conn:
        rows = conn.execute(sa.text(f"SELECT key, started, ended FROM {prefix}_spans WHERE kind = :k"),
                            {"k": kind}).all()
    events: dict[Any, list[tuple[Any, int]]] = {}
    for key, started, ended in rows:
        bucket = events.setdefault(key if by_key else None, [])
        bucket += [(started, 1), (ended, -1)]
    most = 0
    for moments in events.values():
        now = 0
        for _, step in sorted(moments, key=lambda m: (m[0], m[1])):
            now += step
            most = max(most, now)
    return most


def _start(procs: Procs) -> list[Any]:
    started = [procs.spawn() for _ in range(PROCESSES)]
    return [procs.ready(p) for p in started]


def test_global_and_key_limits_hold_across_processes(engine: sa.Engine, models: Any, prefix: str,
                                                      procs: Procs) -> None:
    queue = limits_app.build_queue(prefix, engine)
    partner, export = queue.registry.get("partner"), queue.registry.get("export")
    enqueue(engine, queue, *[partner() for _ in range(30)])
    enqueue(engine, queue, *[export(tenant=t) for t in "abc" * 8])
    with Sampler(engine, prefix, "partner") as partners, Sampler(engine, prefix, "export") as exports:
        workers = _start(procs)
        wait_until(lambda: _done(engine, prefix, "partner") == 30, what="every partner job")
        wait_until(lambda: _done(engine, prefix, "export") == 24, what="every export job")
    assert partners.samples > 10 and exports.samples > 10
    assert partners.most <= 2 and _overlap(engine, prefix, "partner") <= 2
    assert exports.most_per_key <= 1 and _overlap(engine, prefix, "export", by_key=True) <= 1
    assert _overlap(engine, prefix, "export") >= 2  # different keys still ran in parallel
    for proc in workers:
        assert procs.stop(proc) == 0


def test_a_backlog_never_delays_another_keys_first_job_by_more_than_one_round(
        engine: sa.Engine, models: Any, prefix: str, procs: Procs) -> None:
    queue = limits_app.build_queue(prefix, engine)
    fair = queue.registry.get("fair")
    enqueue(engine, queue, *[fair(tenant="big") for _ in range(20)])
    enqueue(engine, queue, fair(tenant="small"))  # enqueued after the whole backlog
    workers = _start(procs)
    wait_until(lambda: _done(engine, prefix, "fair") == 21, what="every fair job")
    with engine.connect() as conn:
        order = [k for (k,) in conn.execute(sa.text(
            f"SELECT key FROM {prefix}_spans WHERE kind = 'fair' ORDER BY started"))]
    assert order.index("small") <= 1, order  # one round: at most big's first job before it
    for proc in workers:
        assert procs.stop(proc) == 0


def test_a_limit_set_at_runtime_is_obeyed_by_running_workers(engine: sa.Engine, models: Any, prefix: str,
                                                             procs: Procs) -> None:
    queue = limits_app.build_queue(prefix, engine)
    plain = queue.registry.get("plain")
    workers = _start(procs)
    queue.set_limit(engine, "plain", global_concurrency=1, actor="ops")
    enqueue(engine, queue, *[plain() for _ in range(12)])
    with Sampler(engine, prefix, "plain") as sampler:
        wait_until(lambda: _done(engine, prefix, "plain") == 12, what="every plain job")
    assert sampler.most <= 1 and _overlap(engine, prefix, "plain") <= 1
    [info] = [i for i in queue.limits(engine) if i.kind == "plain"]
    assert (info.name, info.value, info.source) == ("global_concurrency", 1, "override")
    for proc in workers:
        assert procs.stop(proc) == 0


def test_a_killed_workers_claims_stop_counting_once_recovered(engine: sa.Engine, models: Any, prefix: str,
                                                              procs: Procs) -> None:
    queue = limits_app.build_queue(prefix, engine)
    stuck = queue.registry.get("stuck")
    first = procs.start()
    [held] = enqueue(engine, queue, stuck(hold=True))
    wait_until(lambda: _spans(engine, prefix, held), what="the first run to start")
    [waiting] = enqueue(engine, queue, stuck())
    procs.stop(first, signal.SIGKILL)
    with Sampler(engine, prefix, "stuck") as sampler:
        others = _start(procs)
        wait_until(lambda: _done(engine, prefix, "stuck") == 2, what="both jobs, after the recovery")
    assert sampler.most <= 1
    with engine.connect() as conn:
        recovered = conn.execute(sa.text(
            f"SELECT min(recorded_at) FROM {prefix}_journal WHERE job_id = :j AND outcome = 'stale-recovered'"),
            {"j": held}).scalar_one()
        next_start = conn.execute(sa.text(
            f"SELECT min(started) FROM {prefix}_spans WHERE kind = 'stuck' AND (job_id = :w OR run_no > 1)"),
            {"w": waiting}).scalar_one()
    assert recovered is not None and next_start >= recovered  # the dead claim held its slot until recovered
    for proc in others:
        assert procs.stop(proc) == 0


def _spans(engine: sa.Engine, prefix: str, job_id: str) -> bool:
    with engine.connect() as conn:
        return conn.execute(sa.text(f"SELECT count(*) FROM {prefix}_spans WHERE job_id = :j"),
                            {"j": job_id}).scalar_one() > 0

