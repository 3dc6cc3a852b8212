"""``venturi limits``: list the limits in force and their use, set and clear runtime overrides (docs/limits.md).

A concurrency is a number; a rate is ``LIMIT/DURATION`` (``100/1m``);
``none`` sets "no limit" (overriding a declared one).  Each change is
recorded in the limit history with ``--actor``.  With ``--app`` the
commands know the app's tasks: ``list`` shows the declared limits too, and
``set`` refuses a key limit for a kind whose task declares no ``limit_key``.
"""

from __future__ import annotations

from typing import Any

import click

from venturi_sa.cli.connect import app_queue, opened
from venturi_sa.cli.durations import BadDuration, parse_duration
from venturi_sa.cli.main import cli
from venturi_sa.cli.options import actor_option, queue_options
from venturi_sa.cli.output import emit_json, table
from venturi_sa.declarations.limit_rules import Rate
from venturi_sa.errors import InvalidOption
from venturi_sa.ops.limits import UNSET, LimitInfo


def _count(ctx: click.Context, param: click.Parameter, value: str | None) -> Any:
    if value is None:
        return UNSET
    if value.lower() == "none":
        return None
    try:
        return int(value)
    except ValueError:
        raise click.BadParameter(f"{value!r} is not a whole number (or 'none')") from None


def _rate(ctx: click.Context, param: click.Parameter, value: str | None) -> Any:
    if value is None:
        return UNSET
    if value.lower() == "none":
        return None
    limit, _, per = value.partition("/")
    try:
        return Rate(int(limit), parse_duration(per))
    except InvalidOption as exc:  # a well-formed rate out of range: say which bound
        raise click.BadParameter(str(exc)) from None
    except (ValueError, BadDuration):
        raise click.BadParameter(f"{value!r} is not LIMIT/DURATION (e.g. 100/1m) or 'none'") from None


def _show(found: list[LimitInfo], as_json: bool) -> None:
    if as_json:
        emit_json([info.as_dict() for info in found])
    elif not found:
        click.echo("no limits")
    else:
        rows = [[i.kind, i.name, "none" if i.value is None else str(i.value), i.source, i.in_use, i.key or ""]
                for i in found]
        click.echo(table(("kind", "limit", "value", "source", "in use", "key"), rows))


@cli.group("limits")
def limits() -> None:
    """Limits across every worker: list, set, clear."""


@limits.command("list")
@queue_options
def list_limits(dsn: str | None, prefix: str, as_json: bool) -> None:
    """The overridden limits with their use (declared ones need the workers' task code: see queue.limits)."""
    with opened(dsn, prefix) as engine:
        _show(app_queue(prefix).limits(engine), as_json)


@limits.command("set")
@queue_options
@actor_option
@click.option("--global", "global_concurrency", callback=_count, metavar="N", help="Jobs of KIND at once.")
@click.option("--per-key", "key_concurrency", callback=_count, metavar="N", help="Jobs of one key at once.")
@click.option("--rate", "rate_limit", callback=_rate, metavar="LIMIT/DURATION", help="Starts of KIND per window.")
@click.option("--key-rate", "key_rate_limit", callback=_rate, metavar="LIMIT/DURATION",
              help="Starts of one key per window.")
@click.argument("kind", metavar="KIND")
def set_limit(dsn: str | None, prefix: str, as_json: bool, actor: str, global_concurrency: Any,
              key_concurrency: Any, rate_limit: Any, key_rate_limit: Any, kind: str) -> None:
    """Override KIND's limits from every worker's next claim (options left out stay as they are).

    With --app, a key limit for a kind whose task declares no limit_key is refused.
    """
    with opened(dsn, prefix) as engine:
        found = app_queue(prefix).set_limit(engine, kind, global_concurrency=global_concurrency,
                                             key_concurrency=key_concurrency, rate_limit=rate_limit,
                                             key_rate_limit=key_rate_limit, actor=actor)
    _show(found, as_json)


@limits.command("clear")
@queue_options
@actor_option
@click.argument("kind", metavar="KIND")
@click.argument("names", nargs=-1, metavar="[NAME]...")
def clear_limit(dsn: str | None, prefix: str, as_json: bool, actor: str, kind: str, names: tuple[str, ...]) -> None:
    """Remove KIND's overrides NAME... (all if none named); the declared values apply again."""
    with opened(dsn, prefix) as engine:
        gone = app_queue(prefix).clear_limit(engine, kind, *names, actor=actor)
    if as_json:
        emit_json({"kind": kind, "cleared": gone})
    else:
        click.echo(f"{kind}: cleared {', '.join(gone)}" if gone else f"{kind}: no override to clear")
