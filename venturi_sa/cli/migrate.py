"""``venturi migrate`` (apply venturi's migrations) and ``venturi sql`` (print them offline)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

import alembic_venturi
from venturi_sa.cli.connect import opened
from venturi_sa.cli.failures import CliError
from venturi_sa.cli.main import cli
from venturi_sa.cli.options import app_option, dsn_option, json_option, prefix_option
from venturi_sa.cli.output import emit_json
from venturi_sa.prefix import Names

if TYPE_CHECKING:
    from sqlalchemy import Engine

REVISION_HELP = f"Target revision (v1 ... {alembic_venturi.HEAD}, or head)."


@cli.command()
@app_option
@dsn_option
@prefix_option
@click.option("--revision", default="head", show_default=True, help=REVISION_HELP)
@click.option("--stamp", is_flag=True,
              help="For tables your app's own migrations created: record venturi's head in "
                   "<prefix>_alembic_version (only if the tables are at head), so `venturi migrate` "
                   "upgrades them from now on.")
@json_option
def migrate(dsn: str | None, prefix: str, revision: str, stamp: bool, as_json: bool) -> None:
    """Create or upgrade the queue's tables to REVISION (default: the newest).

    Runs in one transaction under a per-prefix lock, so several processes may
    run it at once; other prefixes and your own tables are not touched.  A
    queue whose tables exist without <prefix>_alembic_version is managed by
    your app's migrations: it is left alone (exit 0) unless --stamp is given.
    """
    from alembic.util import CommandError  # Alembic loads when a migration runs, not with every command

    with opened(dsn, bound=False) as engine:
        before = alembic_venturi.current(engine, prefix, report_app_managed=True)
        if before == alembic_venturi.APP_MANAGED:
            _app_managed(engine, prefix, stamp, as_json)
            return
        if stamp:
            raise CliError(f"queue {prefix!r} is {_state(before)}: --stamp is only for tables "
                           "your app's own migrations created")
        try:
            alembic_venturi.upgrade(engine, prefix, revision)
        except CommandError as exc:
            raise CliError(f"cannot migrate queue {prefix!r} to {revision!r}: {exc}") from None
        after = alembic_venturi.current(engine, prefix)
    if as_json:
        emit_json({"prefix": prefix, "from": before, "to": after, "changed": before != after})
    elif before == after:
        click.echo(f"queue {prefix!r}: already at {after}; nothing to do")
    else:
        click.echo(f"queue {prefix!r}: migrated {before or 'nothing (new tables)'} -> {after}")


def _state(revision: str | None) -> str:
    return "not created yet" if revision is None else f"already tracked by venturi (at {revision})"


def _app_managed(engine: Engine, prefix: str, stamp: bool, as_json: bool) -> None:
    """Report a queue whose tables the app's own migrations manage; with ``stamp``, hand it to venturi."""
    names = Names(prefix)
    if stamp:
        alembic_venturi.stamp(engine, prefix)  # SchemaNotMigrated (one line, exit 1) if not at head
        after = alembic_venturi.current(engine, prefix)
        if as_json:
            emit_json({"prefix": prefix, "from": alembic_venturi.APP_MANAGED, "to": after, "changed": True})
        else:
            click.echo(f"queue {prefix!r}: stamped at {after}; from now on `venturi migrate --prefix {prefix}` "
                       "upgrades it (keep its tables out of your own autogenerate with exclude_venturi)")
        return
    if as_json:
        emit_json({"prefix": prefix, "from": alembic_venturi.APP_MANAGED, "to": alembic_venturi.APP_MANAGED,
                   "changed": False})
        return
    click.echo(f"queue {prefix!r}: its tables are managed by your app's own migrations "
               f"(they exist and there is no {names.version_table} table); nothing to do. Upgrade them with "
               "your own Alembic (autogenerate, then upgrade), or switch to venturi's migrations with "
               f"`venturi migrate --prefix {prefix} --stamp`")


@cli.command()
@prefix_option
@click.option("--revision", default="head", show_default=True,
              help="Target revision, or a range such as v1:v3 (from an existing v1).")
def sql(prefix: str, revision: str) -> None:
    """Print the DDL that migrates an empty database's queue, without connecting.

    The script is one BEGIN ... COMMIT transaction for psql; it also fills
    <prefix>_alembic_version, so `venturi migrate` continues from it later.
    """
    from alembic.util import CommandError

    try:
        click.echo(alembic_venturi.offline_sql(prefix, revision), nl=False)
    except CommandError as exc:
        raise CliError(f"cannot render SQL for queue {prefix!r} at {revision!r}: {exc}") from None
