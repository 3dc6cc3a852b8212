"""The ``venturi`` command group, its global behaviour and error handling.

Every error a user can cause prints one ``venturi: error: ...`` line on
stderr and exits non-zero (2 for usage mistakes, 1 otherwise), including a
statement cancelled by ``--query-timeout`` ("the database is busy: ...").
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import click

from venturi_sa.cli.failures import QUERY_TIMEOUT_META, translate
from venturi_sa.storage.query_timeouts import DEFAULT_SECONDS


class VenturiGroup(click.Group):
    """A group whose subcommands' errors become one-line :class:`CliError` messages."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except Exception as exc:  # noqa: BLE001 - translated, or re-raised untouched
            error = translate(exc, ctx)
            if error is None or error is exc:
                raise
            raise error from None


CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


@click.group(cls=VenturiGroup, context_settings=CONTEXT)
@click.version_option(package_name="venturi", prog_name="venturi")
@click.option("--query-timeout", type=click.FloatRange(min=0), default=DEFAULT_SECONDS, show_default=True,
              envvar="VENTURI_QUERY_TIMEOUT", metavar="SECONDS",
              help="The longest a command's statement may wait for a lock or run (0: no bound); not applied "
                   "to migrate, cleanup, archive and worker  [env: VENTURI_QUERY_TIMEOUT]")
@click.pass_context
def cli(ctx: click.Context, query_timeout: float) -> None:
    """venturi: a PostgreSQL job queue in your application's database.

    Every command that talks to a database takes --dsn (or VENTURI_DSN) and
    --prefix (or VENTURI_PREFIX, default "venturi").  Start with
    `venturi quickstart` to see it work on a throwaway database.
    """
    ctx.meta[QUERY_TIMEOUT_META] = query_timeout


def main(argv: Sequence[str] | None = None) -> None:
    """The console-script entry point (``venturi``; also ``python -m venturi_sa``)."""
    cli.main(args=list(argv) if argv is not None else None, prog_name="venturi",
             auto_envvar_prefix="VENTURI")
