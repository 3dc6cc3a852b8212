"""``venturi migrate`` (apply venturi's migrations) and ``venturi sql`` (print them offline)."""

from __future__ import annotations

import click

import alembic_venturi
from venturi_sa.cli.connect import opened
from venturi_sa.cli.failures import CliError
from venturi_sa.cli.main import cli
from venturi_sa.cli.options import app_option, dsn_option, json_option, prefix_option
from venturi_sa.cli.output import emit_json

REVISION_HELP = f"Target revision (v1 ... {alembic_venturi.HEAD}, or head)."


@cli.command()
@app_option
@dsn_option
@prefix_option
@click.option("--revision", default="head", show_default=True, help=REVISION_HELP)
@json_option
def migrate(dsn: str | None, prefix: str, revision: str, as_json: bool) -> None:
    """Create or upgrade the queue's tables to REVISION (default: the newest).

    Runs in one transaction under a per-prefix lock, so several processes may
    run it at once; other prefixes and your own tables are not touched.
    """
    from alembic.util import CommandError  # Alembic loads when a migration runs, not with every command

    with opened(dsn) as engine:
        before = alembic_venturi.current(engine, prefix)
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
