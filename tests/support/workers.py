"""What every test tier needs around a worker: committed enqueue, row and journal reads, a worker in a
thread, and a stolen lease (what a zombie run looks like); waiting is in ``support.waiting``."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session

from support.waiting import WAIT
from venturi_sa import Models, Queue, Task, Worker
from venturi_sa.storage import claim as claims
from venturi_sa.storage import recovery
from venturi_sa.storage.params import ClaimParams, RecoverParams


def enqueue(engine: sa.Engine, queue: Queue, *tasks: Task, **options: Any) -> list[str]:
    """Enqueue ``tasks`` in one committed transaction; return the job ids in order."""
    with Session(engine) as session, session.begin():
        return [job.id for job in queue.enqueue_many(session, list(tasks), **options)]


def job_row(engine: sa.Engine, models: Models, job_id: str) -> sa.Row[Any]:
    with engine.connect() as conn:
        return conn.execute(sa.select(models.jobs_table).where(models.jobs_table.c.id == job_id)).one()


def journal(engine: sa.Engine, models: Models, job_id: str) -> list[sa.Row[Any]]:
    """The job's journal rows in order."""
    t = models.journal_table
    with engine.connect() as conn:
        return list(conn.execute(sa.select(t).where(t.c.job_id == job_id).order_by(t.c.id)))


def steal(engine: sa.Engine, models: Models, job_id: str, kind: str, thief: str = "thief:1") -> None:
    """What a lost lease looks like: the lease expires, another worker recovers the job and reclaims it.

    Call it from the running handler: its run is then a zombie whose outcome
    (and session work) the fence must discard.
    """
    with Session(engine) as session, session.begin():
        session.execute(sa.update(models.Job).where(models.Job.id == job_id)
                        .values(claim_expires_at=sa.func.now() - timedelta(seconds=1))
                        .execution_options(synchronize_session=False))
        recovered = recovery.recover(models, session, RecoverParams(max_failures={kind: 10}))
        assert [r.id for r in recovered] == [job_id]
    with Session(engine) as session, session.begin():
        [job] = claims.claim(models, session, ClaimParams(
            worker_id=thief, kinds=[kind], limit=1, leases={}, default_lease=timedelta(minutes=5)))
        assert job.id == job_id and job.run_count == 2


@contextmanager
def running(worker: Worker) -> Iterator[Worker]:
    """Run ``worker.run()`` in a thread; stop it and wait for it on exit."""
    errors: list[BaseException] = []

    def target() -> None:
        try:
            worker.run()
        except BaseException as exc:  # noqa: BLE001 - reported to the test below
            errors.append(exc)

    thread = threading.Thread(target=target, name="test-worker", daemon=True)
    thread.start()
    try:
        yield worker
    finally:
        worker.stop()
        thread.join(WAIT)
        assert not thread.is_alive(), "worker did not stop"
    assert not errors, f"worker.run() raised {errors[0]!r}"
