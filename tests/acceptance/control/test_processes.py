"""Cancel across processes: a real worker process ends a running job cancelled from here, with and without LISTEN."""

from __future__ import annotations

from typing import Any

import control_app
import pytest
import sqlalchemy as sa
from support.control import side
from support.waiting import wait_until
from support.workers import enqueue, job_row, journal

pytestmark = pytest.mark.timeout(90)


@pytest.mark.parametrize("listen", [True, False], ids=["listen", "poll-only"])
def test_a_worker_process_ends_a_cancelled_run(engine: sa.Engine, models: Any, prefix: str, procs: Any,
                                               listen: bool) -> None:
    """Delivery is measured on the database clock: cancel commit -> handler saw it (renewal every 1 s)."""
    queue = control_app.build_queue(prefix, engine)
    proc = procs.start(listen=listen)
    [job_id] = enqueue(engine, queue, queue.registry.get("hold")())
    wait_until(lambda: side(engine, prefix, "started", job_id), what="the handler to start")
    with engine.connect() as conn:
        asked = conn.execute(sa.select(sa.func.clock_timestamp())).scalar_one()
    queue.cancel(engine, job_id, "from another process", actor="ops")
    wait_until(lambda: job_row(engine, models, job_id).status == "dead", what="the cancelled outcome")
    [seen] = side(engine, prefix, "seen", job_id)
    print(f"\ncross-process cancel delivery ({'listen' if listen else 'poll-only'}): "
          f"{(seen.at - asked).total_seconds() * 1000:.0f} ms")
    assert [(e.outcome, e.note) for e in journal(engine, models, job_id)] == [
        ("dead", "cancelled by ops while running: from another process")]
    assert side(engine, prefix, "side", job_id) == []  # its ctx.session work rolled back
    assert procs.stop(proc) == 0
