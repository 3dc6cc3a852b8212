"""Throttle across worker processes: one start per window per key, retries included, every job run."""

from __future__ import annotations

from collections.abc import Iterator
from itertools import pairwise
from typing import Any

import pytest
import sqlalchemy as sa
import throttle_app
from sqlalchemy.orm import Session
from support.processes import PROCESS_WAIT, Procs, app_procs
from support.waiting import wait_until


@pytest.fixture
def procs(pg_url: str, engine: sa.Engine, models: Any, prefix: str) -> Iterator[Procs]:
    yield from app_procs(throttle_app, engine, pg_url, prefix)


def scalar(engine: sa.Engine, sql: str) -> Any:
    with engine.connect() as conn:
        return conn.execute(sa.text(sql)).scalar()


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_three_processes_start_each_key_once_per_window(engine: sa.Engine, prefix: str, procs: Procs) -> None:
    workers = [procs.start() for _ in range(3)]
    queue = throttle_app.build_queue(prefix, engine)
    burst = queue.registry.get("burst")
    tasks = [burst(key=key, n=n, fail_first=n == 0) for key in ("a", "b") for n in range(4)]
    with Session(engine) as session, session.begin():  # one commit: all eight due at once, every worker woken
        queue.enqueue_many(session, tasks)
    wait_until(lambda: scalar(engine, f"SELECT count(*) FROM {prefix}_jobs WHERE status = 'completed'") == 8,
               PROCESS_WAIT, "every burst job completed", every=0.1)
    assert [procs.stop(w) for w in workers] == [0, 0, 0]
    with engine.connect() as conn:
        starts = conn.execute(sa.text(f"SELECT key, claimed_at, job_id, run_no, pid FROM {prefix}_starts "
                                      "ORDER BY key, claimed_at")).all()
    assert len(starts) == 10  # 8 jobs, 2 of them retried once: nothing dropped, nothing run twice
    for key in ("a", "b"):
        times = [s.claimed_at for s in starts if s.key == key]
        gaps = [later - earlier for earlier, later in pairwise(times)]
        assert min(gaps) >= throttle_app.WINDOW, (key, gaps)  # the retries waited a window too
    assert scalar(engine, f"SELECT count(*) FROM {prefix}_journal WHERE outcome = 'retried'") == 2
