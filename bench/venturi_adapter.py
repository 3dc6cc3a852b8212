"""peerbench adapter for venturi_sa (registered at run time by ``bench/run.py``).

Uses venturi's public API only, as a user would: ``alembic_venturi.upgrade``
for the schema, ``Queue.enqueue`` / ``Queue.enqueue_many(..., ids_only=True)`` inside a plain
SQLAlchemy ``Session`` (the caller commits), and ``Worker.run()`` in a
thread, stopped with ``Worker.stop()``.  With ``--driver asyncpg`` (or
``psycopg_async``) the application is async: ``enqueue_async`` /
``enqueue_many_async`` in an ``AsyncSession`` (on the enqueuer's own event
loop) and a ``Worker`` on an ``AsyncEngine``, whose claims, outcomes and
LISTEN go through that async driver.  Profiles with ``processes > 1``
(``tuned_p2``, ``tuned_p4``) run that many worker processes under venturi's
own supervisor, as ``venturi worker --processes N`` does (like raw_psycopg2's
``*_p2`` profiles, timed from every process connected).  The same adapter
on the other drivers is registered as ``venturi_sa_psycopg``,
``venturi_sa_asyncpg`` and ``venturi_sa_psycopg_async`` (one process, the
default and tuned profiles), so one run gives the per-driver table.

Importable only where the shared harness's ``peerbench`` package is on
``sys.path`` (``bench/run.py`` arranges that, also for its child processes).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
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
    "tuned_p4": ({"concurrency": 100, "batch_size": 100}, 4),
}
DESCRIPTIONS = {
    "default": "Worker defaults (concurrency=10, batch_size=100, listen=True)",
    "tuned": "concurrency=100, batch_size=100 (claims of up to 100); 1 process",
    "tuned_p2": "same as tuned, 2 worker processes under venturi's supervisor (venturi worker --processes 2)",
    "tuned_p4": "same as tuned, 4 worker processes under venturi's supervisor (venturi worker --processes 4)",
}


def _url(dsn: str, driver: str) -> str:
    return f"postgresql+{driver}://" + dsn.split("://", 1)[1]


def engine_for(dsn: str, driver: str = DRIVER, **kwargs: Any) -> sa.Engine:
    """A sync engine on ``driver`` (psycopg2 or psycopg; psycopg2 for an async ``driver``) for a harness DSN."""
    return sa.create_engine(_url(dsn, "psycopg2" if driver in ASYNC_DRIVERS else driver), **kwargs)


def worker_engine_for(dsn: str, driver: str = DRIVER, **kwargs: Any) -> Any:
    """What the Worker gets: an ``AsyncEngine`` for an async ``driver``, else :func:`engine_for`'s."""
    if driver in ASYNC_DRIVERS:
        from sqlalchemy.ext.asyncio import create_async_engine

        return create_async_engine(_url(dsn, driver), **kwargs)
    return engine_for(dsn, driver, **kwargs)


class _Enqueuer:
    def __init__(self, dsn: str, driver: str) -> None:
        self.engine = engine_for(dsn, driver)

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

    def __init__(self, dsn: str, driver: str) -> None:
        from sqlalchemy.ext.asyncio import create_async_engine

        self.loop = asyncio.new_event_loop()
        self.engine = create_async_engine(_url(dsn, driver))

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


def _worker(dsn: str, driver: str, options: dict[str, Any],
            worker_queue: venturi_sa.Queue | None = None) -> tuple[Any, venturi_sa.Worker]:
    pool = int(options.get("concurrency", 10)) + 5
    engine = worker_engine_for(dsn, driver, pool_size=pool, max_overflow=10)
    return engine, venturi_sa.Worker(worker_queue or queue, engine, **options)


def _run_one(dsn: str, driver: str, options: dict[str, Any], stop: threading.Event,
             started: Callable[[], None] | None, worker_queue: venturi_sa.Queue | None = None) -> None:
    """Run one Worker in a thread until ``stop`` is set; then stop it gracefully."""
    engine, worker = _worker(dsn, driver, options, worker_queue)
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


def _supervised_child(dsn: str, driver: str, options: dict[str, Any], gate: str, index: int) -> None:
    """One process of ``venturi worker --processes N``: its own engine and worker; ready, the gate, ``run()``.

    The worker runs on the child's main thread, as the CLI's does: it stops on
    the SIGTERM the supervisor forwards, finishing its running jobs.
    """
    engine, worker = _worker(dsn, driver, options)
    if isinstance(engine, sa.Engine):
        with engine.connect():
            pass  # connected before the clock starts, like the in-process profiles
    Path(gate, f"ready-{index}").touch()
    while not Path(gate, "go").exists():
        time.sleep(0.005)
    worker.run()
    if isinstance(engine, sa.Engine):
        engine.dispose()


def _run_supervised(dsn: str, driver: str, options: dict[str, Any], processes: int,
                    ready: Callable[[], None], stop: threading.Event) -> None:
    """``processes`` workers under venturi's :class:`Supervisor`; the drain is timed from all of them connected."""
    from venturi_sa.worker.supervisor import Supervisor

    gate = tempfile.mkdtemp(prefix="venturi-bench-")
    supervisor = Supervisor(functools.partial(_supervised_child, dsn, driver, options, gate), processes)
    thread = threading.Thread(target=supervisor.run, name="venturi-bench-supervisor")
    thread.start()  # off the main thread: the supervisor installs no signal handlers here
    try:
        while len(list(Path(gate).glob("ready-*"))) < processes and thread.is_alive():
            time.sleep(0.005)
        ready()
        Path(gate, "go").touch()
        stop.wait()
    finally:
        supervisor.stop()
        thread.join(120)
        shutil.rmtree(gate, ignore_errors=True)


def _notes(driver: str) -> str:
    return (
        "venturi_sa: enqueue_one = Session + queue.enqueue + commit; enqueue_bulk = "
        "queue.enqueue_many(1000, ids_only=True) + commit; worker = Worker.run() in a thread (LISTEN/NOTIFY on), "
        "*_p2/_p4 under venturi's supervisor; "
        f"driver {driver}" + (" (AsyncSession + enqueue_async, Worker on an AsyncEngine)."
                              if driver in ASYNC_DRIVERS else ".")
    )


class VenturiSaAdapter(QueueAdapter):
    """venturi on ``DRIVER`` (psycopg2 unless ``bench/run.py --driver`` says otherwise)."""

    name = "venturi_sa"
    driver = DRIVER
    distributions = ("venturi", "SQLAlchemy", DRIVER_DISTRIBUTIONS.get(DRIVER, DRIVER))
    worker_profiles = DESCRIPTIONS
    latency_profile = "default"
    remaining_sql = f"SELECT count(*) FROM {PREFIX}_jobs WHERE status IN ('pending', 'claimed')"
    notes = _notes(DRIVER)

    def setup(self, dsn: str) -> None:
        engine = engine_for(dsn, self.driver)
        try:
            alembic_venturi.upgrade(engine, PREFIX)
        finally:
            engine.dispose()

    @contextlib.contextmanager
    def open_enqueuer(self, dsn: str) -> Iterator[_Enqueuer | _AsyncEnqueuer]:
        enq = (_AsyncEnqueuer if self.driver in ASYNC_DRIVERS else _Enqueuer)(dsn, self.driver)
        try:
            yield enq
        finally:
            enq.close()

    def run_worker(self, dsn: str, profile: str, ready: Callable[[], None], stop: threading.Event) -> None:
        options, processes = PROFILES[profile]
        if processes == 1:
            _run_one(dsn, self.driver, options, stop, ready)
        else:
            _run_supervised(dsn, self.driver, options, processes, ready, stop)


def _on(driver: str) -> dict[str, Any]:
    """The class attributes of venturi on ``driver``: one process, the defaults and the tuned profile."""
    return {"name": f"venturi_sa_{driver}", "driver": driver, "notes": _notes(driver),
            "distributions": ("venturi", "SQLAlchemy", DRIVER_DISTRIBUTIONS[driver]),
            "worker_profiles": {p: DESCRIPTIONS[p] for p in ("default", "tuned")}}


# The same adapter on each other driver, as systems of their own (``bench/run.py`` registers them), so
# one run puts every driver side by side: ``--systems venturi_sa,venturi_sa_psycopg,venturi_sa_asyncpg,...``.
VenturiPsycopgAdapter = type("VenturiPsycopgAdapter", (VenturiSaAdapter,), _on("psycopg"))
VenturiAsyncpgAdapter = type("VenturiAsyncpgAdapter", (VenturiSaAdapter,), _on("asyncpg"))
VenturiPsycopgAsyncAdapter = type("VenturiPsycopgAsyncAdapter", (VenturiSaAdapter,), _on("psycopg_async"))
DRIVER_SYSTEMS = {"venturi_sa_psycopg": "VenturiPsycopgAdapter", "venturi_sa_asyncpg": "VenturiAsyncpgAdapter",
                  "venturi_sa_psycopg_async": "VenturiPsycopgAsyncAdapter"}
