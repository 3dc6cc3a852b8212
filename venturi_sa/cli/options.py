"""Options shared by several commands: ``--dsn``, ``--prefix``, ``--json``.

``--dsn`` also reads ``VENTURI_DSN`` and ``--prefix`` reads ``VENTURI_PREFIX``.
"""

from __future__ import annotations

import getpass
import socket
from collections.abc import Callable
from typing import Any, TypeVar

import click

from venturi_sa.errors import BadPrefix
from venturi_sa.prefix import validate_prefix

DEFAULT_PREFIX = "venturi"
F = TypeVar("F", bound=Callable[..., Any])


def check_prefix(ctx: click.Context, param: click.Parameter, value: str) -> str:
    try:
        return validate_prefix(value)
    except BadPrefix as exc:
        raise click.BadParameter(str(exc), ctx=ctx, param=param) from None


def dsn_option(fn: F) -> F:
    return click.option(
        "--dsn", "-d", envvar="VENTURI_DSN", metavar="URL",
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
    """``--dsn``, ``--prefix`` and ``--json``, in that order in ``--help``."""
    return dsn_option(prefix_option(json_option(fn)))


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
