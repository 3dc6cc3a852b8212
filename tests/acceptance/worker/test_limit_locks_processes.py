"""A kind's claim lock held elsewhere, against real worker processes: the other kinds drain, the held kind
follows once the lock is gone, and SIGTERM stops a worker at once (no claim waits on the lock)."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from typing import Any

import limits_app
import pytest
import sqlalchemy as sa
from support.processes import Procs, app_procs
from support.waiting import wait_until
from support.workers import enqueue

pytestmark = pytest.mark.timeout(120)
PROMPT_STOP = 15.0  # seconds: the app's grace is 5 s, and nothing it runs here takes long


@pytest.fixture
def procs(pg_url: str, engine: sa.Engine, models: Any, prefix: str) -> Iterator[Procs]:
    yield from app_procs(limits_app, engine, pg_url, prefix)


def _done(engine: sa.Engine, prefix: str, kind: str) -> int:
    with engine.connect() as conn:
        return int(conn.execute(sa.text(f"SELECT count(*) FROM {prefix}_jobs WHERE kind = :k AND status = "
                                         "'completed'"), {"k": kind}).scalar_one())


def test_a_held_kind_lock_stalls_no_other_kind_and_sigterm_is_honoured(engine: sa.Engine, models: Any,
                                                                        prefix: str, procs: Procs) -> None:
    queue = limits_app.build_queue(prefix, engine)
    plain, export = queue.registry.get("plain"), queue.registry.get("export")
    enqueue(engine, queue, export(tenant="a"), export(tenant="b"))
    with engine.connect() as holder:  # a claimer stuck inside its claim of "export" (frozen, half-open)
        held = holder.execute(sa.select(sa.func.pg_try_advisory_xact_lock(
            sa.func.hashtextextended(f"{prefix}:limit:export", 0)))).scalar_one()
        assert held
        first, second = procs.start(), procs.start()
        enqueue(engine, queue, *[plain() for _ in range(6)])
        wait_until(lambda: _done(engine, prefix, "plain") == 6, what="every unlimited job under the held lock")
        assert _done(engine, prefix, "export") == 0
        first.send_signal(signal.SIGTERM)
        assert first.wait(PROMPT_STOP) == 0
        holder.rollback()
    wait_until(lambda: _done(engine, prefix, "export") == 2, what="the held kind once its lock is free")
    assert procs.stop(second) == 0
