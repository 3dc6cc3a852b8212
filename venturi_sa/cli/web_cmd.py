"""``venturi web``: the dashboard on its own, served by uvicorn (the ``web`` extra).

Binds to 127.0.0.1 by default and answers only requests whose ``Host`` names
the bound address or localhost (``--allowed-host`` adds names; anything else
gets 421, which defeats DNS rebinding).  Bound to a non-loopback ``--host`` it
asks for a per-start access token, printed in its URL and then kept in a
cookie (``--no-token`` turns it off), and without ``--read-only`` prints a
warning: mount the app in your application to put it behind your own auth.
"""

from __future__ import annotations

import secrets
import signal
import socket
from collections.abc import Sequence
from typing import Any

import click
import sqlalchemy as sa

from venturi_sa.cli.connect import opened, query_timeout
from venturi_sa.cli.failures import CliError
from venturi_sa.cli.main import cli
from venturi_sa.cli.options import APP_META, app_option, dsn_option, prefix_option

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8787
NEEDS_EXTRA = "the dashboard needs the web extra: pip install 'venturi[web]'"


def serve_dashboard(engine: sa.Engine, prefix: str, *, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT,
                    read_only: bool = False, allowed_hosts: Sequence[str] = (), token: bool | None = None,
                    **options: Any) -> None:
    """Serve the dashboard of ``prefix`` on ``engine`` until Ctrl-C or SIGTERM, then return.

    Only ``Host`` headers naming ``host``, localhost or ``allowed_hosts`` are
    answered (else 421); ``token`` (default: when ``host`` is not loopback)
    asks for the access token printed in the URL.
    """
    try:
        import uvicorn

        from venturi_sa.web import create_app
        from venturi_sa.web.standalone import HostCheck, is_loopback, served_names
    except ImportError:
        raise CliError(NEEDS_EXTRA) from None
    loopback = is_loopback(host)
    access = secrets.token_urlsafe(24) if (not loopback if token is None else token) else None
    if not loopback and not read_only:
        click.echo(f"venturi: warning: serving a dashboard that can change jobs on {host}, reachable from "
                   "other machines and with no login: use --read-only, or mount it behind your own auth",
                   err=True)
    app = create_app(engine, prefix, read_only=read_only, **options)
    guarded = HostCheck(app, served_names(host, allowed_hosts), access)
    listening = _bind(host, port)  # listening before we say so: the printed URL answers at once
    query = f"?token={access}" if access else ""
    click.echo(f"dashboard of queue {prefix!r} at http://{_shown(host)}:{port}/{query} "
               f"({'read-only' if read_only else 'actions enabled'}); Ctrl-C stops it")
    server = uvicorn.Server(uvicorn.Config(guarded, log_level="warning", timeout_graceful_shutdown=2))
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
@click.option("--allowed-host", "allowed_hosts", multiple=True, metavar="NAME",
              help="Another Host name to answer (a proxy's or the machine's DNS name); repeatable.")
@click.option("--token/--no-token", "token", default=None,
              help="Ask for a per-start access token (default: when --host is not loopback).")
def web(dsn: str | None, prefix: str, host: str, port: int, read_only: bool, poll_interval: float,
        no_listen: bool, allowed_hosts: tuple[str, ...], token: bool | None) -> None:
    """Serve a live web dashboard of one queue: counts, charts, jobs, workers, actions.

    With --app, the app's task types validate payload edits on the job page.
    """
    app = click.get_current_context().meta.get(APP_META)
    with opened(dsn, prefix, concurrency=8, bound=False) as engine:
        serve_dashboard(engine, prefix, host=host, port=port, read_only=read_only, allowed_hosts=allowed_hosts,
                        token=token,
                        poll_interval=poll_interval, listen=not no_listen, query_timeout=query_timeout(),
                        tasks=app.queue.registry if app is not None else ())
