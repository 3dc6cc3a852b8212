"""A bound on how long the dashboard's and the CLI's statements may wait: statement and lock timeouts.

:func:`bounded` returns a view of an engine (``Engine.execution_options``:
same pool, same connections) whose every transaction starts with
``set_config('statement_timeout', ..., true)`` and ``set_config('lock_timeout',
..., true)``: the ``SET LOCAL`` form, so the settings end with that transaction
(commit or rollback) and a pooled connection goes back to the pool without
them; the application's own use of the engine is never affected.  A statement
that waits longer (behind a ``LOCK TABLE``, a migration, ``VACUUM FULL``, a
stuck transaction holding row locks) is cancelled by the server, its
transaction rolled back, and the caller gets a database error that
:func:`is_busy` recognizes.  Transactions opened with ``AUTOCOMMIT`` get no
bound (``SET LOCAL`` needs a transaction block).
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from venturi_sa.storage.faults import sqlstate

DEFAULT_SECONDS = 5.0
"""The default bound of a dashboard page's and a CLI command's statements."""
_BUSY_CODES = frozenset({
    "57014",  # query_canceled (statement_timeout)
    "55P03",  # lock_not_available (lock_timeout)
})
_OPTION = "venturi_query_timeout"


def bounded(engine: sa.Engine, seconds: float | None) -> sa.Engine:
    """``engine`` whose every transaction waits at most ``seconds`` for a lock or a statement (None, 0: unbounded).

    The returned engine shares ``engine``'s pool; the bound is set per
    transaction and gone after its commit or rollback.  The ``begin``
    listener sits on ``engine`` itself (once) and acts only for connections
    of a bounded view: a listener on the view breaks its own
    ``execution_options()`` on SQLAlchemy 2.0.23.
    """
    if not seconds:
        return engine
    if seconds < 0:
        raise ValueError("a query timeout must be positive (or 0/None for none)")
    if not sa.event.contains(engine, "begin", _limit):
        sa.event.listen(engine, "begin", _limit)
    return engine.execution_options(**{_OPTION: seconds})


def _limit(conn: sa.Connection) -> None:
    """Set the statement and lock timeouts of a bounded view's transaction (``SET LOCAL``: its own only)."""
    seconds = conn.get_execution_options().get(_OPTION)
    if not seconds:  # the application's own transactions on the engine: nothing to do
        return
    dbapi: Any = conn.connection.dbapi_connection
    if getattr(dbapi, "autocommit", False):
        return
    millis = str(max(1, round(float(seconds) * 1000)))
    cursor = dbapi.cursor()
    try:
        cursor.execute("SELECT set_config('statement_timeout', %s, true), set_config('lock_timeout', %s, true)",
                       (millis, millis))
    finally:
        cursor.close()


def query_timeout(engine: sa.Engine) -> float | None:
    """The bound :func:`bounded` put on ``engine``, if any."""
    found = engine.get_execution_options().get(_OPTION)
    return float(found) if found else None


def is_busy(error: BaseException) -> bool:
    """True if ``error`` is a statement cancelled by ``statement_timeout`` or ``lock_timeout`` (retry later)."""
    return sqlstate(error) in _BUSY_CODES
