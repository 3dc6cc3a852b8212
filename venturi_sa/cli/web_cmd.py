"""``venturi web``: the dashboard on its own, served by uvicorn (the ``web`` extra).

Binds to 127.0.0.1 by default; a non-loopback ``--host`` without
``--read-only`` prints a warning, since the standalone server has no login of
its own (mount the app in your application to put it behind your auth).
"""

from __future__ import annotations

import ipaddress
import signal
import socket
from typing import Any

import click
import sqlalchemy as sa

from venturi_sa.cli.connect import opened
from venturi_sa.cli.failures import CliError
from venturi_sa.cli.main import cli
from venturi_sa.cli.options import APP_META, app_option, dsn_option, prefix_option

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8787
NEEDS_EXTRA = "the dashboard needs the web extra: pip install 'venturi[web]'"


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def serve_dashboard(engine: sa.Engine, prefix: str, *, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT,
                    read_only: bool = False, **options: Any) -> None:
    """Serve the dashboard of ``prefix`` on ``engine`` until Ctrl-C or SIGTERM, then return."""
    try:
        import uvicorn

        from venturi_sa.web import create_app
    except ImportError:
        raise CliError(NEEDS_EXTRA) from None
    if not _loopback(host) and not read_only:
        click.echo(f"venturi: warning: serving a dashboard that can change jobs on {host}, reachable from "
                   "other machines and with no login: use --read-only, or mount it behind your own auth",
                   err=True)
    app = create_app(engine, prefix, read_only=read_only, **options)
    listening = _bind(host, port)  # listening before we say so: the printed URL answers at once
    click.echo(f"dashboard of queue {prefix!r} at http://{_shown(host)}:{port}/ "
               f"({'read-only' if read_only else 'actions enabled'}); Ctrl-C stops it")
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=2))
    # uvicorn shuts down gracefully on SIGINT/SIGTERM, then raises the signal again for us:
    # both end here, so the caller's cleanup (the quick start's throwaway cluster) runs.
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        server.run(sockets=[listening])
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
        app.state.dashboard.feed.close()
        listening.close()
    click.echo("dashboard stopped")


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port``; a one-line error if the address cannot be had."""
    try:
        info = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
    except OSError as exc:
        raise CliError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    listening = socket.socket(info[0], socket.SOCK_STREAM)
    try:
        listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listening.bind(info[4])
        listening.listen(128)
    except OSError as exc:
        listening.close()
        raise CliError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    return listening


def _shown(host: str) -> str:
    return f"[{host}]" if ":" in host else host


@cli.command()
@app_option
@dsn_option
@prefix_option
@click.option("--host", default=DEFAULT_HOST, show_default=True, help="Address to bind to.")
@click.option("--port", type=click.IntRange(1, 65535), default=DEFAULT_PORT, show_default=True)
@click.option("--read-only", is_flag=True, help="Show everything, refuse every action (enforced on the server).")
@click.option("--poll-interval", type=click.FloatRange(0.2, 60), default=2.0, show_default=True,
              help="Seconds between change checks while a browser watches (NOTIFY wakes it sooner).")
@click.option("--no-listen", is_flag=True, help="Do not LISTEN (e.g. behind PgBouncer in transaction mode).")
def web(dsn: str | None, prefix: str, host: str, port: int, read_only: bool, poll_interval: float,
        no_listen: bool) -> None:
    """Serve a live web dashboard of one queue: counts, charts, jobs, workers, actions.

    With --app, the app's task types validate payload edits on the job page.
    """
    app = click.get_current_context().meta.get(APP_META)
    with opened(dsn, prefix, concurrency=8) as engine:
        serve_dashboard(engine, prefix, host=host, port=port, read_only=read_only,
                        poll_interval=poll_interval, listen=not no_listen,
                        tasks=app.queue.registry if app is not None else ())
