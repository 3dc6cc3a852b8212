"""``venturi worker APP``: run a worker for the application's queue until SIGTERM/SIGINT."""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import click
from click.core import ParameterSource
from sqlalchemy import Engine
from sqlalchemy.exc import OperationalError

from venturi_sa.cli.app_loader import load_app
from venturi_sa.cli.connect import NO_DSN, HiddenSqlParameters, make_engine, normalize_dsn, require_schema, shown
from venturi_sa.cli.failures import CliError, CliUsageError, first_line
from venturi_sa.cli.main import cli
from venturi_sa.cli.options import dsn_option
from venturi_sa.errors import VenturiError
from venturi_sa.worker.app import WorkerApp
from venturi_sa.worker.joblog import RunContextFilter
from venturi_sa.worker.lifecycle import CONNECT_TIMEOUT, DatabaseUnavailable, wait_for_database

F = TypeVar("F", bound=Callable[..., Any])
LOG_FORMAT = "%(asctime)s %(levelname)-7s [%(threadName)s] %(name)s: %(message)s"


def setup_logging(verbose: int) -> None:
    """INFO for everything; ``-v``: venturi at DEBUG; ``-vv``: also every SQL statement (without parameters)."""
    logging.basicConfig(level=logging.INFO, format=LOG_FORMAT)
    for handler in logging.getLogger().handlers:
        handler.addFilter(RunContextFilter())
        handler.addFilter(HiddenSqlParameters())  # -vv: the statements, never their parameters (payloads)
    logging.getLogger("alembic").setLevel(logging.WARNING)  # the schema check's chatter
    if verbose >= 1:
        logging.getLogger("venturi_sa").setLevel(logging.DEBUG)
    if verbose >= 2:
        logging.getLogger("sqlalchemy.engine").setLevel(logging.INFO)


def split_kinds(value: str | None) -> list[str] | None:
    if value is None:
        return None
    kinds = [k.strip() for k in value.split(",") if k.strip()]
    if not kinds:
        raise CliUsageError("--kinds needs at least one kind, e.g. --kinds send_receipt,charge_card")
    return kinds


@contextmanager
def engine_for(worker_app: WorkerApp, dsn: str | None, prefix: str, concurrency: int,
               connect_timeout: float = CONNECT_TIMEOUT) -> Iterator[Any]:
    """``--dsn`` (or ``VENTURI_DSN``) if given, else the app's engine; reached, and checked to be migrated.

    A server that is starting, stopping or unreachable, or a transient error
    during the schema check (its connection dropped), is waited for and the
    check retried (logged once) for at most ``connect_timeout`` seconds; then,
    or at once for any other failure (wrong credentials, an unknown database),
    one-line ``CliError``; an unmigrated queue raises ``SchemaNotMigrated``.
    """
    if dsn:
        engine = make_engine(normalize_dsn(dsn), concurrency)
        try:
            reach(engine, prefix, connect_timeout)
            yield engine
        finally:
            engine.dispose()
        return
    try:
        app_engine = worker_app.get_engine()
    except VenturiError as exc:
        raise CliError(str(exc)) from None
    if app_engine is None:
        raise CliError(NO_DSN + " (or give APP an engine: venturi_sa.WorkerApp(queue, engine=...))")
    sync_engine = app_engine if isinstance(app_engine, Engine) else app_engine.sync_engine
    reach(sync_engine, prefix, connect_timeout)
    yield app_engine


def reach(engine: Engine, prefix: str, connect_timeout: float) -> None:
    """Connect and check queue ``prefix``'s schema as one start-up step, retried within ``connect_timeout`` s.

    The whole step is retried (:func:`wait_for_database`), not only the
    first connection: a connection dropped during the schema check is tried
    again.  One-line ``CliError`` if the server stays unavailable or the
    connection fails otherwise; other database errors and ``SchemaNotMigrated``
    are raised as they are.
    """
    try:
        wait_for_database(lambda: require_schema(engine, prefix), timeout=connect_timeout)
    except DatabaseUnavailable as exc:
        raise CliError(f"cannot connect to {shown(engine.url)}: {exc}") from None
    except OperationalError as exc:
        raise CliError(f"cannot connect to {shown(engine.url)}: {first_line(exc)}") from None


def worker_options(fn: F) -> F:
    """The options of ``venturi worker`` (also ``flask venturi worker``'s)."""
    for option in reversed((
        dsn_option,
        click.option("--kinds", "-k", metavar="KIND,...", help="Only run these task kinds (default: all registered)."),
        click.option("--concurrency", "-c", type=click.IntRange(1, 1000), default=10, show_default=True,
                     help="Jobs run at once (threads)."),
        click.option("--poll-interval", type=click.FloatRange(0.01, 3600), default=5.0, show_default=True,
                     help="Longest idle sleep in seconds between claim attempts."),
        click.option("--grace", type=click.FloatRange(0, 86400), default=30.0, show_default=True,
                     help="Seconds running jobs get to finish on SIGTERM/SIGINT before they are released."),
        click.option("--connect-timeout", type=click.FloatRange(0, 86400), default=CONNECT_TIMEOUT,
                     show_default=True,
                     help="Seconds to wait at start for a database that is starting, stopping or unreachable "
                          "(wrong credentials or an unknown database fail at once)."),
        click.option("--no-listen", is_flag=True,
                     help="Do not LISTEN for new jobs; poll only (e.g. behind PgBouncer in transaction mode)."),
        click.option("--worker-id", metavar="ID", help="Name recorded in claimed_by (default: host:pid)."),
        click.option("--metrics-port", type=click.IntRange(1, 65535), metavar="PORT",
                     help="Serve Prometheus metrics on this port (needs venturi[metrics])."),
        click.option("--verbose", "-v", count=True, help="-v: debug logs from venturi; -vv: also SQL."),
    )):
        fn = option(fn)
    return fn


def typed_options() -> set[str] | None:
    """The names of the options typed on the current command line (None outside a click command)."""
    ctx = click.get_current_context(silent=True)
    if ctx is None:
        return None
    return {name for name in ctx.params if ctx.get_parameter_source(name) is not ParameterSource.DEFAULT}


def _given(worker_app: WorkerApp, values: dict[str, Any], typed_names: set[str] | None) -> dict[str, Any]:
    """The worker options: each value typed on the command line, else the app's, else the option's default."""
    if typed_names is None:
        typed_names = typed_options()
    chosen = {}
    for name, value in values.items():
        key = "listen" if name == "no_listen" else name
        typed = typed_names is None or name in typed_names
        if typed or key not in worker_app.options:
            chosen[key] = not value if name == "no_listen" else value
    return chosen


def run_worker(worker_app: WorkerApp, *, dsn: str | None, kinds: str | None, concurrency: int,
               poll_interval: float, grace: float, no_listen: bool, worker_id: str | None,
               metrics_port: int | None, verbose: int, typed: set[str] | None = None,
               connect_timeout: float = CONNECT_TIMEOUT) -> None:
    """Build the app's worker from the command line's options and run it until it stops.

    ``typed``: the options typed on the command line (default: read from the
    current click context), which win over the app's own options.
    """
    prefix = worker_app.queue.prefix
    setup_logging(verbose)  # before the start-up wait, which logs once
    with engine_for(worker_app, dsn, prefix, concurrency, connect_timeout) as engine:  # one line if it fails
        options = _given(worker_app, {"concurrency": concurrency, "poll_interval": poll_interval, "grace": grace,
                                      "no_listen": no_listen, "worker_id": worker_id,
                                      "connect_timeout": connect_timeout}, typed)
        if metrics_port is not None:
            from venturi_sa.metrics import PrometheusMetrics, serve

            options["on_event"] = PrometheusMetrics()
            serve(metrics_port)
        runner = worker_app.worker(engine, kinds=split_kinds(kinds), **options)
        runner.run()
    logging.getLogger("venturi_sa.worker").info("processed %d jobs", runner.processed)


def _child(app: str, options: dict[str, Any], typed: set[str] | None, index: int) -> None:
    """One process of ``--processes``: its own app, engine and worker (worker id ``ID/index``, metrics PORT+index)."""
    options = dict(options)
    if options.get("worker_id"):
        options["worker_id"] = f"{options['worker_id']}/{index}"
    if options.get("metrics_port") is not None:
        options["metrics_port"] += index
    run_worker(load_app(app), typed=typed, **options)


def supervise(app: str, processes: int, options: dict[str, Any]) -> None:
    """``--processes N``: check the app and its schema here, then run N worker processes (see the supervisor).

    SIGTERM or SIGINT before the supervisor runs (while the app is imported
    and the database reached) ends the command with status 0: no worker
    process exists yet.
    """
    from venturi_sa.worker.supervisor import Supervisor, stops_exit_quietly

    with stops_exit_quietly():
        worker_app = load_app(app)
        setup_logging(options.get("verbose", 0))
        with engine_for(worker_app, options.get("dsn"), worker_app.queue.prefix, 1,
                        float(options.get("connect_timeout", CONNECT_TIMEOUT))):  # one line if it fails
            pass
        target = functools.partial(_child, app, options, typed_options())
        Supervisor(target, processes, stop_timeout=float(options.get("grace", 30.0)) + 60.0).run()  # its own handlers


@cli.command()
@click.argument("app", metavar="APP")
@worker_options
@click.option("--processes", "-p", type=click.IntRange(1, 256), default=1, show_default=True,
              help="Worker processes to run (a supervisor restarts any that dies).")
def worker(app: str, processes: int, **options: Any) -> None:
    """Run a worker for the Queue at APP ('package.module:queue') until stopped.

    APP may also name a venturi_sa.WorkerApp (which may give the engine and
    the worker's hooks: then --dsn is optional), a Flask app with the
    venturi extension, or a function of no arguments returning one.

    A database that is starting, stopping or unreachable, or a connection
    dropped during the start-up schema check, is waited for and retried, up
    to --connect-timeout seconds; wrong credentials or an unknown database
    fail at once.  SIGTERM or SIGINT stops claiming and gives running jobs --grace seconds;
    a second signal stops at once.  Jobs still running are released back to
    pending (no failure counted).  Refuses to start if the queue's tables are
    not migrated to this venturi's version.  With --processes N, a
    supervisor runs N worker processes (each its own engine, worker id and
    --concurrency threads), forwards SIGTERM/SIGINT to them and restarts one
    that dies, with backoff; metrics are served on PORT, PORT+1, ...
    """
    if processes > 1:
        supervise(app, processes, options)
    else:
        run_worker(load_app(app), **options)
