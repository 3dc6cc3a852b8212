"""How the command fails: one ``venturi: error: ...`` line on stderr and a non-zero exit.

User mistakes (no DSN, unreachable database, unmigrated schema, unknown job
id, bad duration or prefix, bad options) never print a traceback.
"""

from __future__ import annotations

from typing import IO, Any

import click
from sqlalchemy.exc import DBAPIError, SQLAlchemyError

from venturi_sa.errors import VenturiError
from venturi_sa.storage.query_timeouts import is_busy

QUERY_TIMEOUT_META = "venturi.query_timeout"  # ctx.meta: the --query-timeout of this run

EXIT_FAILURE = 1
EXIT_USAGE = 2


class CliError(click.ClickException):
    """An error shown as exactly one line: ``venturi: error: <message>``."""

    exit_code = EXIT_FAILURE

    def __init__(self, message: str) -> None:
        super().__init__(one_line(message))

    def show(self, file: IO[Any] | None = None) -> None:
        click.echo(f"venturi: error: {self.format_message()}", file=file, err=file is None)


class CliUsageError(CliError):
    """A mistake in the command line itself (exit status 2)."""

    exit_code = EXIT_USAGE


def one_line(message: str) -> str:
    """``message`` folded onto one line (database errors span several)."""
    return " ".join(part.strip() for part in message.strip().splitlines() if part.strip())


def first_line(exc: BaseException) -> str:
    """The first line of a (database) error's message, without SQLAlchemy's trailers."""
    if isinstance(exc, DBAPIError) and exc.orig is not None:
        text = str(exc.orig)
    else:
        text = str(exc)
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[0] if lines else type(exc).__name__


def busy(seconds: float | None) -> CliError:
    """The one line a command gets when its statement waited past ``--query-timeout`` and was cancelled."""
    waited = f"more than {seconds:g} s" if seconds else "too long"
    return CliError(f"the database is busy: a statement waited {waited} for a lock on the queue's tables (a "
                    "migration, VACUUM FULL or a long transaction holds one) and was cancelled, nothing changed; "
                    "retry later, or raise --query-timeout")


def translate(exc: BaseException, ctx: click.Context) -> CliError | None:
    """The one-line error for ``exc``, or None when it is a bug (let it show a traceback)."""
    if isinstance(exc, CliError):
        return exc
    if isinstance(exc, click.UsageError):
        path = exc.ctx.command_path if exc.ctx is not None else ctx.command_path
        return CliUsageError(f"{exc.format_message()} (see '{path} --help')")
    if isinstance(exc, click.ClickException):
        return CliError(exc.format_message())
    if isinstance(exc, VenturiError):
        return CliError(str(exc))
    if isinstance(exc, SQLAlchemyError) and is_busy(exc):
        return busy(ctx.meta.get(QUERY_TIMEOUT_META))
    if isinstance(exc, SQLAlchemyError):
        return CliError(f"database error: {first_line(exc)}")
    return None
