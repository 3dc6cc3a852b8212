"""The worker's storage verbs on the async drivers (asyncpg, psycopg async), through ``run_sync``.

The async side runs the same SQL as the sync worker; this checks that every
bind it uses (text, integer and interval arrays, JSONB as text, intervals,
``set_config`` in RETURNING, ``unnest``) works on both async drivers: claim,
fenced outcomes, lease renewal and recovery, soonest visible.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from driver_kit import driver_url
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.orm import Session

from venturi_sa.models import new_job_id
from venturi_sa.states import Outcome
from venturi_sa.storage.backend import Backend
from venturi_sa.storage.enqueue import InsertParams, NewJob
from venturi_sa.storage.params import (
    ClaimParams,
    Fence,
    FinishManyParams,
    FinishParams,
    RecoverParams,
    RenewParams,
    SoonestParams,
)

LEASE = timedelta(seconds=30)


def lifecycle(backend: Backend, session: Session) -> dict[str, Any]:
    """Enqueue three jobs, claim two, renew, complete one with a carry-free outcome, pause one."""
    jobs = [NewJob(id=new_job_id(), kind="k", payload={"n": n, "s": "é"}, priority=n % 2) for n in range(3)]
    backend.insert_jobs(session, InsertParams(jobs=jobs, notify_channel=backend.models.names.channel))
    session.commit()
    claimed = backend.claim(session, ClaimParams(worker_id="w:1", kinds=["k"], limit=2, leases={"k": LEASE},
                                                 default_lease=LEASE))
    session.commit()
    fences = [Fence(job_id=j.id, kind=j.kind, claimed_by="w:1", run_count=j.run_count) for j in claimed]
    renewed = backend.renew(session, RenewParams(worker_id="w:1", runs=fences, lease=LEASE))
    written = backend.finish_many(session, FinishManyParams(outcomes=[
        FinishParams(fence=fences[0], outcome=Outcome.COMPLETED, note="done", attachment={"rows": [1, 2.5]}),
        FinishParams(fence=fences[1], outcome=Outcome.PAUSED, note="later", delay=timedelta(hours=1),
                     save_carry=True, carry={"page": 2}),
    ]))
    session.commit()
    soonest = backend.soonest_visible(session, SoonestParams(kinds=["k"]))
    recovered = backend.recover(session, RecoverParams(max_failures={"k": 3}))
    session.commit()
    return {"claimed": [j.payload["n"] for j in claimed], "renewed": len(renewed.renewed),
            "written": len(written), "soonest": soonest, "recovered": recovered,
            "carry": claimed[1].carry}


@pytest.mark.parametrize("driver", ["asyncpg", "psycopg_async"])
def test_the_worker_verbs_run_on_the_async_drivers(driver: str, pg_url: str, backend: Backend) -> None:
    async def scenario() -> dict[str, Any]:
        engine = create_async_engine(driver_url(pg_url, driver))
        try:
            async with engine.connect() as conn:
                return await conn.run_sync(lambda sync_conn: lifecycle(backend, Session(bind=sync_conn)))
        finally:
            await engine.dispose()

    got = asyncio.run(scenario())
    assert got["claimed"] == [0, 2] and got["renewed"] == 2 and got["written"] == 2
    assert got["soonest"] is not None and 3500 < got["soonest"] <= 3600
    assert got["recovered"] == [] and got["carry"] is None
    models = backend.models
    sync = sa.create_engine(pg_url)
    try:
        with sync.connect() as conn:
            rows = {r.status: r for r in conn.execute(sa.select(models.jobs_table))}
            journal = conn.execute(sa.select(models.journal_table.c.outcome, models.journal_table.c.attachment)
                                   .order_by(models.journal_table.c.id)).all()
    finally:
        sync.dispose()
    assert set(rows) == {"completed", "pending"} and rows["completed"].payload == {"n": 0, "s": "é"}
    assert [tuple(j) for j in journal] == [("completed", {"rows": [1, 2.5]}), ("paused", None)]
