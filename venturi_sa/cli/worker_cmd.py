"""``venturi worker APP``: run a worker for the application's queue until SIGTERM/SIGINT."""

from __future__ import annotations

import functools
import importlib
import logging
import os
import sys
from dataclasses import dataclass

import click

from venturi_sa.cli.connect import opened
from venturi_sa.cli.failures import CliError, CliUsageError
from venturi_sa.cli.main import cli
from venturi_sa.cli.options import dsn_option
from venturi_sa.queue import Queue
from venturi_sa.worker import Worker
from venturi_sa.worker.joblog import RunContextFilter

LOG_FORMAT = "%(asctime)s %(levelname)-7s [%(threadName)s] %(name)s: %(message)s"


def setup_logging(verbose: int) -> None:
    """INFO for everything; ``-v``: venturi at DEBUG; ``-vv``: also every SQL statement."""
    logging.basicConfig(level=logging.INFO, format=LOG_FORMAT)
    for handler in logging.getLogger().handlers:
        handler.addFilter(RunContextFilter())
    logging.getLogger("alembic").setLevel(logging.WARNING)  # the schema check's chatter
    if verbose >= 1:
        logging.getLogger("venturi_sa").setLevel(logging.DEBUG)
    if verbose >= 2:
        logging.getLogger("sqlalchemy.engine").setLevel(logging.INFO)


def load_queue(app: str) -> Queue:
    """Import ``package.module:attribute`` and return the :class:`Queue` it names.

    The current directory is importable, as for ``python -m``.  The attribute
    may be a dotted path, or a function of no arguments returning the queue.
    """
    module_name, sep, attr = app.partition(":")
    if not sep or not module_name or not attr:
        raise CliUsageError(f"APP must look like 'package.module:queue', got {app!r}")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        target: object = importlib.import_module(module_name)
    except ImportError as exc:
        raise CliError(f"cannot import {module_name!r} (from APP {app!r}): {exc}") from None
    for part in attr.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise CliError(f"module {module_name!r} has no attribute {attr!r} (from APP {app!r})") from None
    if callable(target) and not isinstance(target, Queue):
        target = target()
    if not isinstance(target, Queue):
        raise CliError(f"APP {app!r} is a {type(target).__name__}, not a venturi_sa.Queue")
    return target


def split_kinds(value: str | None) -> list[str] | None:
    if value is None:
        return None
    kinds = [k.strip() for k in value.split(",") if k.strip()]
    if not kinds:
        raise CliUsageError("--kinds needs at least one kind, e.g. --kinds send_receipt,charge_card")
    return kinds


@dataclass(frozen=True)
class WorkerSettings:
    """What a worker process needs to build its own engine and Worker (picklable, for --processes)."""

    app: str
    dsn: str | None
    kinds: list[str] | None
    concurrency: int
    poll_interval: float
    grace: float
    listen: bool
    worker_id: str | None
    metrics_port: int | None
    verbose: int


def run_worker(settings: WorkerSettings, index: int | None = None) -> None:
    """One worker process: load the queue, open the engine, run until SIGTERM/SIGINT.

    ``index`` is set in a child of ``--processes``: its ``worker_id`` gets a
    ``/index`` suffix and its metrics port is ``metrics_port + index``.
    """
    queue = load_queue(settings.app)
    with opened(settings.dsn, queue.prefix, concurrency=settings.concurrency) as engine:
        setup_logging(settings.verbose)
        hook = None
        if settings.metrics_port is not None:
            from venturi_sa.metrics import PrometheusMetrics, serve

            hook = PrometheusMetrics()
            serve(settings.metrics_port + (index or 0))
        worker_id = settings.worker_id
        if worker_id is not None and index is not None:
            worker_id = f"{worker_id}/{index}"
        runner = Worker(queue, engine, kinds=settings.kinds, concurrency=settings.concurrency,
                        poll_interval=settings.poll_interval, grace=settings.grace, listen=settings.listen,
                        worker_id=worker_id, on_event=hook)
        runner.run()
    logging.getLogger("venturi_sa.worker").info("processed %d jobs", runner.processed)


def _child(settings: WorkerSettings, index: int) -> None:
    run_worker(settings, index)


def supervise(settings: WorkerSettings, processes: int) -> None:
    """``--processes N``: check the app and schema here, then run N worker processes (see supervisor)."""
    from venturi_sa.worker.supervisor import Supervisor

    queue = load_queue(settings.app)
    with opened(settings.dsn, queue.prefix, concurrency=1):  # one line on stderr if not migrated
        pass
    setup_logging(settings.verbose)
    grace_and_joins = settings.grace + 60.0
    Supervisor(functools.partial(_child, settings), processes, stop_timeout=grace_and_joins).run()


@cli.command()
@click.argument("app", metavar="APP")
@dsn_option
@click.option("--kinds", "-k", metavar="KIND,...", help="Only run these task kinds (default: all registered).")
@click.option("--concurrency", "-c", type=click.IntRange(1, 1000), default=10, show_default=True,
              help="Jobs run at once (threads).")
@click.option("--poll-interval", type=click.FloatRange(0.01, 3600), default=5.0, show_default=True,
              help="Longest idle sleep in seconds between claim attempts.")
@click.option("--grace", type=click.FloatRange(0, 86400), default=30.0, show_default=True,
              help="Seconds running jobs get to finish on SIGTERM/SIGINT before they are released.")
@click.option("--no-listen", is_flag=True,
              help="Do not LISTEN for new jobs; poll only (e.g. behind PgBouncer in transaction mode).")
@click.option("--worker-id", metavar="ID", help="Name recorded in claimed_by (default: host:pid).")
@click.option("--metrics-port", type=click.IntRange(1, 65535), metavar="PORT",
              help="Serve Prometheus metrics on this port (needs venturi[metrics]).")
@click.option("--processes", "-p", type=click.IntRange(1, 256), default=1, show_default=True,
              help="Worker processes to run (a supervisor restarts any that dies).")
@click.option("--verbose", "-v", count=True, help="-v: debug logs from venturi; -vv: also SQL.")
def worker(app: str, dsn: str | None, kinds: str | None, concurrency: int, poll_interval: float,
           grace: float, no_listen: bool, worker_id: str | None, metrics_port: int | None,
           processes: int, verbose: int) -> None:
    """Run a worker for the Queue at APP ('package.module:queue') until stopped.

    SIGTERM or SIGINT stops claiming and gives running jobs --grace seconds;
    a second signal stops at once.  Jobs still running are released back to
    pending (no failure counted).  Refuses to start if the queue's tables are
    not migrated to this venturi's version.  With --processes N, a
    supervisor runs N worker processes (each its own engine, worker id and
    --concurrency threads), forwards SIGTERM/SIGINT to them and restarts one
    that dies, with backoff; metrics are served on PORT, PORT+1, ...
    """
    settings = WorkerSettings(app=app, dsn=dsn, kinds=split_kinds(kinds), concurrency=concurrency,
                              poll_interval=poll_interval, grace=grace, listen=not no_listen,
                              worker_id=worker_id, metrics_port=metrics_port, verbose=verbose)
    if processes > 1:
        supervise(settings, processes)
    else:
        run_worker(settings)
