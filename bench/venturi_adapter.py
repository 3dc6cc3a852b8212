"""peerbench adapter for venturi_sa (registered at run time by ``bench/run.py``).

Uses venturi's public API only, as a user would: ``alembic_venturi.upgrade``
for the schema, ``Queue.enqueue`` / ``Queue.enqueue_many`` inside a plain
SQLAlchemy ``Session`` (the caller commits), and ``Worker.run()`` in a
thread, stopped with ``Worker.stop()``.  Profiles with ``processes > 1``
fork that many worker processes (like raw_psycopg2's ``*_p2`` profiles).

Importable only where the shared harness's ``peerbench`` package is on
``sys.path`` (``bench/run.py`` arranges that, also for its child processes).
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import sqlalchemy as sa
from marshmallow import Schema, fields
from peerbench import hooks
from peerbench.base import QueueAdapter
from sqlalchemy.orm import Session

import alembic_venturi
import venturi_sa

PREFIX = "bench"
# ``bench/run.py --driver`` sets this for itself and every child process.
DRIVER = os.environ.get("VENTURI_BENCH_DRIVER", "psycopg2")
DRIVER_DISTRIBUTIONS = {"psycopg2": "psycopg2-binary", "psycopg": "psycopg"}
models = venturi_sa.make_models(PREFIX)
queue = venturi_sa.Queue(models)


class NoopPayload(Schema):
    seq = fields.Integer(required=True)


@queue.task("noop", payload=NoopPayload)
def noop(payload: Any, ctx: venturi_sa.JobContext) -> None:
    hooks.job_started(payload["seq"])


# profile -> (Worker keyword arguments, number of worker processes)
PROFILES: dict[str, tuple[dict[str, Any], int]] = {
    "default": ({}, 1),
    "tuned": ({"concurrency": 100, "batch_size": 100}, 1),
    "tuned_p2": ({"concurrency": 100, "batch_size": 100}, 2),
}
DESCRIPTIONS = {
    "default": "Worker defaults (concurrency=10, batch_size=100, listen=True)",
    "tuned": "concurrency=100, batch_size=100 (claims of up to 100); 1 process",
    "tuned_p2": "same as tuned, 2 worker processes",
}


def engine_for(dsn: str, **kwargs: Any) -> sa.Engine:
    """An engine on ``DRIVER`` (psycopg2 or psycopg) for a ``postgresql://`` DSN from the harness."""
    return sa.create_engine(f"postgresql+{DRIVER}://" + dsn.split("://", 1)[1], **kwargs)


class _Enqueuer:
    def __init__(self, dsn: str) -> None:
        self.engine = engine_for(dsn)

    def enqueue_one(self, seq: int) -> None:
        """One Session, one ``queue.enqueue``, one commit (like sqlalchemy_orm's add + commit)."""
        with Session(self.engine) as session:
            queue.enqueue(session, noop(seq=seq))
            session.commit()

    def enqueue_bulk(self, seqs: Sequence[int]) -> None:
        with Session(self.engine) as session:
            queue.enqueue_many(session, [noop(seq=s) for s in seqs])
            session.commit()


def _run_one(dsn: str, options: dict[str, Any], stop: Any, started: Callable[[], None] | None,
             worker_queue: venturi_sa.Queue | None = None) -> None:
    """Run one Worker in a thread until ``stop`` is set; then stop it gracefully."""
    pool = int(options.get("concurrency", 10)) + 5
    engine = engine_for(dsn, pool_size=pool, max_overflow=10)
    worker = venturi_sa.Worker(worker_queue or queue, engine, **options)
    thread = threading.Thread(target=worker.run, name="venturi-bench-worker")
    if started is not None:
        started()
    thread.start()
    while not stop.wait(0.05):
        if not thread.is_alive():
            break
    worker.stop()
    thread.join(60)
    engine.dispose()


class VenturiSaAdapter(QueueAdapter):
    name = "venturi_sa"
    distributions = ("venturi", "SQLAlchemy", DRIVER_DISTRIBUTIONS.get(DRIVER, DRIVER))
    worker_profiles = DESCRIPTIONS
    latency_profile = "default"
    remaining_sql = f"SELECT count(*) FROM {PREFIX}_jobs WHERE status IN ('pending', 'claimed')"
    notes = (
        "venturi_sa: enqueue_one = Session + queue.enqueue + commit; enqueue_bulk = "
        "queue.enqueue_many(1000) + commit; worker = Worker.run() in a thread (LISTEN/NOTIFY on); "
        f"driver {DRIVER}."
    )

    def setup(self, dsn: str) -> None:
        engine = engine_for(dsn)
        try:
            alembic_venturi.upgrade(engine, PREFIX)
        finally:
            engine.dispose()

    @contextlib.contextmanager
    def open_enqueuer(self, dsn: str) -> Iterator[_Enqueuer]:
        enq = _Enqueuer(dsn)
        try:
            yield enq
        finally:
            enq.engine.dispose()

    def run_worker(self, dsn: str, profile: str, ready: Callable[[], None], stop: threading.Event) -> None:
        options, processes = PROFILES[profile]
        if processes == 1:
            _run_one(dsn, options, stop, ready)
            return
        ctx = mp.get_context("fork")
        mp_stop = ctx.Event()
        procs = [ctx.Process(target=_run_one, args=(dsn, options, mp_stop, None)) for _ in range(processes)]
        ready()
        for proc in procs:
            proc.start()
        stop.wait()
        mp_stop.set()
        for proc in procs:
            proc.join(60)
