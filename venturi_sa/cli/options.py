"""Options shared by several commands: ``--dsn``, ``--prefix``, ``--json``.

``--dsn`` also reads ``VENTURI_DSN`` and ``--prefix`` reads ``VENTURI_PREFIX``.
"""

from __future__ import annotations

import getpass
import socket
from collections.abc import Callable
from typing import Any, TypeVar

import click
from click.core import ParameterSource

from venturi_sa.cli.app_loader import load_app
from venturi_sa.errors import BadPrefix
from venturi_sa.prefix import validate_prefix

DEFAULT_PREFIX = "venturi"
F = TypeVar("F", bound=Callable[..., Any])


APP_META = "venturi.app"  # ctx.meta: the WorkerApp named by --app
DEFAULTED_META = "venturi.prefix_defaulted"  # ctx.meta: --prefix fell back to DEFAULT_PREFIX


def check_prefix(ctx: click.Context, param: click.Parameter, value: str) -> str:
    """The validated prefix: typed, from VENTURI_PREFIX, from --app's queue, or the default."""
    if ctx.get_parameter_source(param.name or "prefix") is ParameterSource.DEFAULT:
        app = ctx.meta.get(APP_META)
        if app is not None:
            return str(app.queue.prefix)
        ctx.meta[DEFAULTED_META] = True
    try:
        return validate_prefix(value)
    except BadPrefix as exc:
        raise click.BadParameter(str(exc), ctx=ctx, param=param) from None


def load_app_option(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
    if value is not None:
        ctx.meta[APP_META] = load_app(value)


def dsn_from_app(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """``--dsn`` / ``VENTURI_DSN``, else the URL of the engine --app's WorkerApp gives (if any)."""
    app = ctx.meta.get(APP_META)
    if value or app is None:
        return value
    engine = app.get_engine()
    return None if engine is None else str(engine.url.render_as_string(hide_password=False))


def app_option(fn: F) -> F:
    return click.option(
        "--app", "-a", metavar="APP", is_eager=True, expose_value=False, callback=load_app_option,
        help="Take the queue's prefix (and, without --dsn, its database) from APP, as `venturi worker APP`.",
    )(fn)


def dsn_option(fn: F) -> F:
    return click.option(
        "--dsn", "-d", envvar="VENTURI_DSN", metavar="URL", callback=dsn_from_app,
        help="Database URL, e.g. postgresql://user:password@host/dbname  [env: VENTURI_DSN]",
    )(fn)


def prefix_option(fn: F) -> F:
    return click.option(
        "--prefix", "-p", envvar="VENTURI_PREFIX", default=DEFAULT_PREFIX, show_default=True,
        callback=check_prefix, help="Queue prefix (tables <prefix>_jobs, <prefix>_journal)  [env: VENTURI_PREFIX]",
    )(fn)


def json_option(fn: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")(fn)


def queue_options(fn: F) -> F:
    """``--app``, ``--dsn``, ``--prefix`` and ``--json``, in that order in ``--help``."""
    return app_option(dsn_option(prefix_option(json_option(fn))))


def default_actor() -> str:
    """``user@host``: who runs this command, for the journal."""
    try:
        user = getpass.getuser()
    except Exception:  # noqa: BLE001 - no user name in this environment
        user = "unknown"
    return f"{user}@{socket.gethostname()}"


def actor_option(fn: F) -> F:
    return click.option(
        "--actor", envvar="VENTURI_ACTOR", default=default_actor, show_default="user@host",
        help="Who acts (recorded in the journal or the pause record)  [env: VENTURI_ACTOR]",
    )(fn)
