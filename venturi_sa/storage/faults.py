"""Which database errors are worth retrying: the one place that reads SQLSTATEs.

A *transient* error says nothing about the statement itself: the connection
broke, the server is restarting, a lock or a deadlock got in the way, a
privilege was briefly missing.  Retrying the same write later may succeed.
Anything else (a data or programming error) will fail again the same way.
"""

from __future__ import annotations

from sqlalchemy import exc as sa_exc

# SQLSTATE classes and codes that a retry can outlive.
_TRANSIENT_CLASSES = ("08", "53", "57")  # connection, insufficient resources, operator intervention
_TRANSIENT_CODES = frozenset({
    "40001",  # serialization_failure
    "40P01",  # deadlock_detected
    "55P03",  # lock_not_available (lock_timeout)
    "55006",  # object_in_use
    "42501",  # insufficient_privilege: a grant being changed under a running worker
    "25P03",  # idle_in_transaction_session_timeout
})


def sqlstate(error: BaseException) -> str | None:
    """The PostgreSQL SQLSTATE behind a SQLAlchemy or driver error, if any."""
    orig = getattr(error, "orig", error)
    code = getattr(orig, "pgcode", None) or getattr(orig, "sqlstate", None)
    return code if isinstance(code, str) else None


def is_transient(error: BaseException) -> bool:
    """True if retrying the same statement later may succeed."""
    if isinstance(error, sa_exc.DBAPIError) and error.connection_invalidated:
        return True
    if isinstance(error, (sa_exc.OperationalError, sa_exc.InterfaceError, sa_exc.TimeoutError)):
        return True
    code = sqlstate(error)
    if code is None:
        return False
    return code in _TRANSIENT_CODES or code[:2] in _TRANSIENT_CLASSES


def is_undefined_table(error: BaseException) -> bool:
    """True for a missing table or column: the queue's schema is not migrated."""
    return sqlstate(error) in ("42P01", "42703")
