"""Defect 13: which database errors a starting worker waits out (``faults.is_retryable_at_start``)."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from venturi_sa.storage.faults import is_retryable_at_start

pytestmark = pytest.mark.timeout(10)


class DriverError(Exception):
    """A driver error carrying a SQLSTATE as psycopg2 does (``pgcode``)."""

    def __init__(self, message: str, pgcode: str | None = None) -> None:
        super().__init__(message)
        self.pgcode = pgcode


def wrapped(message: str, pgcode: str | None = None, *, invalidated: bool = False,
            kind: type[sa.exc.DBAPIError] = sa.exc.OperationalError) -> sa.exc.DBAPIError:
    return kind("SELECT version_num FROM q_alembic_version", {}, DriverError(message, pgcode),
                connection_invalidated=invalidated)


@pytest.mark.parametrize(("error", "retried"), [
    (wrapped("terminating connection due to administrator command", "57P01"), True),
    (wrapped("canceling statement due to lock timeout", "55P03"), True),
    (wrapped("deadlock detected", "40P01"), True),
    (wrapped("could not serialize access due to concurrent update", "40001"), True),
    (wrapped("canceling statement due to statement timeout", "57014"), True),
    (wrapped("SSL SYSCALL error: EOF detected", invalidated=True), True),
    (wrapped("server closed the connection unexpectedly"), True),
    (wrapped("permission denied for table q_alembic_version", "42501", kind=sa.exc.ProgrammingError), False),
    (wrapped('relation "q_alembic_version" does not exist', "42P01", kind=sa.exc.ProgrammingError), False),
    (wrapped('connection to server at "db" (10.0.0.5), port 5432 failed: FATAL:  password authentication '
             'failed for user "app"'), False),
    (wrapped('connection to server at "db" (10.0.0.5), port 5432 failed: FATAL:  database "shop" does not '
             'exist', invalidated=True), False),
    (wrapped("some unexplained driver failure"), False),
], ids=["terminated", "lock-timeout", "deadlock", "serialization", "statement-timeout", "invalidated",
        "closed-no-sqlstate", "no-privilege", "no-table", "wrong-password", "unknown-database", "unknown"])
def test_start_up_waits_out_transient_errors_but_not_configuration_errors(error: sa.exc.DBAPIError,
                                                                           retried: bool) -> None:
    assert is_retryable_at_start(error) is retried
