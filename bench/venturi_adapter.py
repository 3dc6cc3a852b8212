"""peerbench adapter for venturi_sa (registered at run time by ``bench/run.py``).

Uses venturi's public API only, as a user would: ``alembic_venturi.upgrade``
for the schema, ``Queue.enqueue`` / ``Queue.enqueue_many(..., ids_only=True)`` inside a plain
SQLAlchemy ``Session`` (the caller commits), and ``Worker.run()`` in a
thread, stopped with ``Worker.stop()``.  With ``--driver asyncpg`` (or
``psycopg_async``) the application is async: ``enqueue_async`` /
``enqueue_many_async`` in an ``AsyncSession`` (on the enqueuer's own event
loop) and a ``Worker`` on an ``AsyncEngine``, whose claims, outcomes and
LISTEN go through that async driver.  Profiles with ``processes > 1``
fork that many worker processes (like raw_psycopg2's ``*_p2`` profiles).

Importable only where the shared harness's ``peerbench`` package is on
``sys.path`` (``bench/run.py`` arranges that, also for its child processes).
"""

from __future__ import annotations

import asyncio
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
DRIVER_DISTRIBUTIONS = {"psycopg2": "psycopg2-binary", "psycopg": "psycopg", "asyncpg": "asyncpg",
                        "psycopg_async": "psycopg"}
ASYNC_DRIVERS = ("asyncpg", "psycopg_async")
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


def _url(dsn: str, driver: str) -> str:
    return f"postgresql+{driver}://" + dsn.split("://", 1)[1]


def engine_for(dsn: str, **kwargs: Any) -> sa.Engine:
    """A sync engine on ``DRIVER`` (psycopg2 or psycopg; psycopg2 for an async ``DRIVER``) for a harness DSN."""
    return sa.create_engine(_url(dsn, "psycopg2" if DRIVER in ASYNC_DRIVERS else DRIVER), **kwargs)


def worker_engine_for(dsn: str, **kwargs: Any) -> Any:
    """What the Worker gets: an ``AsyncEngine`` for an async ``DRIVER``, else :func:`engine_for`'s."""
    if DRIVER in ASYNC_DRIVERS:
        from sqlalchemy.ext.asyncio import create_async_engine

        return create_async_engine(_url(dsn, DRIVER), **kwargs)
    return engine_for(dsn, **kwargs)


class _Enqueuer:
    def __init__(self, dsn: str) -> None:
        self.engine = engine_for(dsn)

    def enqueue_one(self, seq: int) -> None:
        """One Session, one ``queue.enqueue``, one commit (like sqlalchemy_orm's add + commit)."""
        with Session(self.engine) as session:
            queue.enqueue(session, noop(seq=seq))
            session.commit()

    def enqueue_bulk(self, seqs: Sequence[int]) -> None:
        """One Session, one ``queue.enqueue_many(..., ids_only=True)`` (the bulk path), one commit."""
        with Session(self.engine) as session:
            queue.enqueue_many(session, [noop(seq=s) for s in seqs], ids_only=True)
            session.commit()

    def close(self) -> None:
        self.engine.dispose()


class _AsyncEnqueuer:
    """An async application's enqueue: ``AsyncSession`` + ``enqueue_async`` + commit, on a loop of its own."""

    def __init__(self, dsn: str) -> None:
        from sqlalchemy.ext.asyncio import create_async_engine

        self.loop = asyncio.new_event_loop()
        self.engine = create_async_engine(_url(dsn, DRIVER))

    async def _one(self, seq: int) -> None:
        from sqlalchemy.ext.asyncio import AsyncSession

        async with AsyncSession(self.engine) as session:
            await queue.enqueue_async(session, noop(seq=seq))
            await session.commit()

    async def _bulk(self, seqs: Sequence[int]) -> None:
        from sqlalchemy.ext.asyncio import AsyncSession

        async with AsyncSession(self.engine) as session:
            await queue.enqueue_many_async(session, [noop(seq=s) for s in seqs], ids_only=True)
            await session.commit()

    def enqueue_one(self, seq: int) -> None:
        self.loop.run_until_complete(self._one(seq))

    def enqueue_bulk(self, seqs: Sequence[int]) -> None:
        self.loop.run_until_complete(self._bulk(seqs))

    def close(self) -> None:
        self.loop.run_until_complete(self.engine.dispose())
        self.loop.close()


def _run_one(dsn: str, options: dict[str, Any], stop: Any, started: Callable[[], None] | None,
             worker_queue: venturi_sa.Queue | None = None) -> None:
    """Run one Worker in a thread until ``stop`` is set; then stop it gracefully."""
    pool = int(options.get("concurrency", 10)) + 5
    engine = worker_engine_for(dsn, pool_size=pool, max_overflow=10)
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
    if isinstance(engine, sa.Engine):
        engine.dispose()  # an AsyncEngine's connections were closed by the worker, on its loop


class VenturiSaAdapter(QueueAdapter):
    name = "venturi_sa"
    distributions = ("venturi", "SQLAlchemy", DRIVER_DISTRIBUTIONS.get(DRIVER, DRIVER))
    worker_profiles = DESCRIPTIONS
    latency_profile = "default"
    remaining_sql = f"SELECT count(*) FROM {PREFIX}_jobs WHERE status IN ('pending', 'claimed')"
    notes = (
        "venturi_sa: enqueue_one = Session + queue.enqueue + commit; enqueue_bulk = "
        "queue.enqueue_many(1000, ids_only=True) + commit; worker = Worker.run() in a thread (LISTEN/NOTIFY on); "
        f"driver {DRIVER}" + (" (AsyncSession + enqueue_async, Worker on an AsyncEngine)."
                              if DRIVER in ASYNC_DRIVERS else ".")
    )

    def setup(self, dsn: str) -> None:
        engine = engine_for(dsn)
        try:
            alembic_venturi.upgrade(engine, PREFIX)
        finally:
            engine.dispose()

    @contextlib.contextmanager
    def open_enqueuer(self, dsn: str) -> Iterator[_Enqueuer | _AsyncEnqueuer]:
        enq = _AsyncEnqueuer(dsn) if DRIVER in ASYNC_DRIVERS else _Enqueuer(dsn)
        try:
            yield enq
        finally:
            enq.close()

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
