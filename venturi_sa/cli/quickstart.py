"""``venturi quickstart``: watch venturi work end to end, on a throwaway database by default.

Starts a temporary PostgreSQL cluster (or uses ``--dsn``), migrates a queue,
enqueues an order's worth of demo jobs in one transaction, runs a real
worker until every job is finished, then prints stats and one job's
journal.  The temporary cluster is removed on exit, even on Ctrl-C.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import click
import sqlalchemy as sa
from sqlalchemy.orm import Session

import alembic_venturi
from venturi_sa.cli import demo
from venturi_sa.cli.connect import make_engine, normalize_dsn, ping, shown
from venturi_sa.cli.failures import CliError
from venturi_sa.cli.jobs import render_job
from venturi_sa.cli.main import cli
from venturi_sa.cli.ops import render_stats
from venturi_sa.cli.options import check_prefix
from venturi_sa.cli.worker_cmd import LOG_FORMAT
from venturi_sa.devtools.throwaway import ThrowawayCluster
from venturi_sa.models import make_models
from venturi_sa.queue import Queue
from venturi_sa.states import TERMINAL
from venturi_sa.worker import Worker

CONCURRENCY = 4
QUIET_FORMAT = "      log: %(levelname)s %(name)s: %(message)s"
FAST_SETTINGS = {"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off"}


class WithoutTraceback(logging.Formatter):
    """Log lines without their tracebacks (the demo's failure is intended; ``-v`` shows them)."""

    def formatException(self, ei: Any) -> str:  # noqa: N802 - logging's name
        return ""


def say(text: str = "") -> None:
    click.echo(text)


def step(n: int, text: str) -> None:
    say(click.style(f"[{n}/5] {text}", bold=True))


@contextmanager
def database(dsn: str | None) -> Iterator[sa.Engine]:
    """An engine on ``dsn``, or on a throwaway cluster that is removed afterwards."""
    if dsn is not None:
        engine = make_engine(normalize_dsn(dsn), CONCURRENCY)
        step(1, f"using the database at {shown(engine.url)}")
        try:
            ping(engine)
            yield engine
        finally:
            engine.dispose()
        return
    step(1, "starting a throwaway PostgreSQL cluster (nothing else is touched)")
    started = time.monotonic()
    cluster = ThrowawayCluster(FAST_SETTINGS)
    try:
        cluster.start()
        engine = make_engine(normalize_dsn(cluster.url), CONCURRENCY)
        say(f"      {cluster.server.describe()}")
        say(f"      ready at {cluster.url} in {time.monotonic() - started:.1f}s")
        try:
            yield engine
        finally:
            engine.dispose()
    finally:
        say("removing the throwaway cluster")
        cluster.stop()


class Progress:
    """The worker's ``on_event`` hook: prints each claim and outcome, stops when all are final."""

    def __init__(self, waiting: set[str]) -> None:
        self.waiting = set(waiting)
        self.started = time.monotonic()
        self.runs: dict[str, int] = {}
        self.lock = threading.Lock()
        self.worker: Worker | None = None
        self.done = threading.Event()

    def __call__(self, name: str, data: dict[str, Any]) -> None:
        if name not in ("claimed", "finished"):
            return
        job_id, kind = data["job_id"], data["kind"]
        with self.lock:
            if name == "claimed":
                self.runs[job_id] = data["run_count"]
                what = f"claimed   run {data['run_count']}"
            else:
                what = f"-> {data['outcome']}"
                if data["outcome"] in TERMINAL:
                    self.waiting.discard(job_id)
            say(f"      {time.monotonic() - self.started:5.2f}s  {kind:<17} {job_id}  {what}")
            finished = not self.waiting
        if finished and self.worker is not None:
            self.done.set()
            self.worker.stop()


def drain(queue: Queue, engine: sa.Engine, ids: set[str], timeout: float) -> None:
    """Run a worker until every job in ``ids`` is completed or dead (or ``timeout`` passes)."""
    progress = Progress(ids)
    worker = Worker(queue, engine, concurrency=CONCURRENCY, poll_interval=0.5, grace=5.0,
                    on_event=progress)
    progress.worker = worker
    watchdog = threading.Timer(timeout, worker.stop)
    watchdog.daemon = True
    watchdog.start()
    try:
        worker.run()
    finally:
        watchdog.cancel()
    if not progress.done.is_set():
        raise CliError(f"the demo jobs did not all finish within {timeout:.0f}s (or it was interrupted)")


def show_results(queue: Queue, engine: sa.Engine, roles: dict[str, Any]) -> None:
    step(5, "results")
    say("      queue stats (`venturi stats`):")
    say(_indent(render_stats(queue.stats(engine))))
    say()
    say("      the warehouse job's journal (`venturi jobs show ID`): failed once, retried, completed")
    job_id = roles["flaky"]
    say(_indent(render_job(queue.get_job(engine, job_id), queue.journal(engine, job_id))))


def _indent(text: str) -> str:
    return "\n".join(f"      {line}" if line else "" for line in text.splitlines())


@cli.command()
@click.option("--dsn", "-d", metavar="URL",
              help="Use this database instead of a throwaway one (its tables are left in place). "
                   "VENTURI_DSN is deliberately not read.")
@click.option("--prefix", "-p", default="quickstart", show_default=True, callback=check_prefix,
              help="Queue prefix for the demo tables.")
@click.option("--timeout", type=click.FloatRange(5, 3600), default=60.0, show_default=True,
              help="Give up if the demo jobs are not all finished after this many seconds.")
@click.option("--verbose", "-v", is_flag=True, help="Also show the worker's log.")
@click.option("--web", "web_port", type=click.IntRange(1, 65535), is_flag=False, flag_value=8787, default=None,
              help="Then keep the dashboard up on the demo data (port 8787 unless given) until Ctrl-C.")
def quickstart(dsn: str | None, prefix: str, timeout: float, verbose: bool, web_port: int | None) -> None:
    """See venturi work: migrate, enqueue an order's jobs, run a worker, show the results.

    With no --dsn a temporary local PostgreSQL cluster is started from the
    installed server binaries and removed afterwards.  Takes about 10 seconds.
    """
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING,
                        format=LOG_FORMAT if verbose else QUIET_FORMAT)
    if not verbose:  # the demo's failure is intended: its one-line warning, without the traceback
        for handler in logging.getLogger().handlers:
            handler.setFormatter(WithoutTraceback(QUIET_FORMAT))
    queue = Queue(make_models(prefix), demo.TASKS)
    with database(dsn) as engine:
        step(2, f"migrating queue {prefix!r} (tables {prefix}_jobs, {prefix}_journal) to {alembic_venturi.HEAD}")
        alembic_venturi.upgrade(engine, prefix)
        step(3, "enqueuing an order's jobs in one transaction (they exist only once it commits)")
        with Session(engine) as session, session.begin():
            roles = demo.enqueue_order(queue, session)
        say("      3 x charge_card (HIGH priority), notify_warehouse (fails once, then succeeds),")
        say("      2 x send_receipt, 2 x refresh_stock for one SKU "
            f"({'coalesced into one job' if roles['coalesced'] else 'NOT coalesced'}),")
        say("      export_sales (pauses twice, resuming from its carry), ask_for_review (delayed 2s)")
        step(4, f"running a worker (concurrency {CONCURRENCY}) until every job is completed or dead")
        drain(queue, engine, demo.all_ids(roles), timeout)
        show_results(queue, engine, roles)
        if web_port is not None:
            from venturi_sa.cli.web_cmd import serve_dashboard
            say()
            serve_dashboard(engine, prefix, port=web_port, tasks=queue.registry)
        if dsn is not None:
            say()
            say(f"left the tables {prefix}_jobs and {prefix}_journal in place; remove them with "
                f"alembic_venturi.downgrade(engine, {prefix!r}, 'base')")
    say()
    say("done. Next: docs/getting-started.md, and `venturi --help` for every command.")
