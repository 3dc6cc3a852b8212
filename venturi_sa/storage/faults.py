"""Which database errors are worth retrying: the one place that reads SQLSTATEs.

A *transient* error says nothing about the statement itself: the connection
broke, the server is restarting, a lock or a deadlock got in the way, a
privilege was briefly missing.  Retrying the same write later may succeed.
Anything else (a data or programming error) will fail again the same way.

An *unavailable* server (:func:`is_unavailable`) is the narrower case: the
server is starting, stopping or cannot be reached.  Wrong credentials or an
unknown database are not: no wait fixes them.  A starting worker waits
(:func:`is_retryable_at_start`) for an unavailable server and for a transient
error under any of its start-up statements (a dropped connection during the
schema check), not for a missing privilege.
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


def is_deadlock(error: BaseException) -> bool:
    """True if PostgreSQL rolled the transaction back to break a deadlock (``40P01``): run it again."""
    return sqlstate(error) == "40P01"


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


# SQLSTATEs of a server that is starting, stopping or cannot take the connection now.
_UNAVAILABLE_CODES = frozenset({
    "57P01",  # admin_shutdown: terminating connection due to administrator command
    "57P02",  # crash_shutdown
    "57P03",  # cannot_connect_now: the database system is starting up / shutting down / in recovery
    "53300",  # too_many_connections: every slot is taken for now
})
# libpq's wording, for connection failures raised with no SQLSTATE (psycopg2 and psycopg at connect
# time).  What the server rejected on purpose is looked for first: the same message holds both parts.
_REFUSED_ON_PURPOSE = ("authentication failed", "no pg_hba.conf entry", "does not exist", "permission denied",
                       "password is required", "server does not support ssl", "invalid dsn",
                       "invalid connection option", "could not translate host name")
_UNAVAILABLE_WORDING = ("the database system is", "connection refused", "no such file or directory",
                        "timeout expired", "timed out", "server closed the connection unexpectedly",
                        "terminating connection", "could not receive data", "could not send data",
                        "network is unreachable", "no route to host", "too many clients",
                        "connection slots are reserved", "temporary failure in name resolution",
                        "connection reset", "broken pipe")


def is_unavailable(error: BaseException) -> bool:
    """True if ``error`` says the server is starting, stopping or unreachable (a wait may outlive it).

    By SQLSTATE where there is one (57P01-03, 53300, class 08); else by the
    driver's message, or an ``OSError`` underneath (asyncpg).  Wrong credentials,
    an unknown database or role, and a host name that does not resolve are not.
    """
    code = sqlstate(error)
    if code is not None:
        return code in _UNAVAILABLE_CODES or code.startswith("08")
    orig = getattr(error, "orig", None) or error
    if isinstance(orig, OSError) or isinstance(orig.__cause__, OSError):
        return True
    if _refused_on_purpose(error):
        return False
    return any(words in _message(error) for words in _UNAVAILABLE_WORDING)


def is_retryable_at_start(error: BaseException) -> bool:
    """True if a starting worker should wait and try again (the start-up wait), whatever step it was at.

    The server is unavailable (:func:`is_unavailable`), or a transient error
    hit one of start-up's statements: its connection was dropped (SQLAlchemy
    saw it invalidated), a lock timeout, a deadlock or a serialization
    failure got in the way, the statement was cancelled (SQLSTATE classes 08,
    53, 57 and the codes of :func:`is_transient`).  Not a missing privilege
    (42501: transient for a running worker, a configuration error at start),
    nor wrong credentials, an unknown database, a schema or any other error:
    no wait fixes those, and start fails at once with their message.
    """
    if is_unavailable(error):
        return True
    code = sqlstate(error)
    if code is None:  # no SQLSTATE: only a connection dropped under a statement, not a connect refused
        return (isinstance(error, sa_exc.DBAPIError) and error.connection_invalidated
                and not _refused_on_purpose(error))
    return code != "42501" and (code in _TRANSIENT_CODES or code[:2] in _TRANSIENT_CLASSES)


def _message(error: BaseException) -> str:
    """The driver's message, lower case, whitespace folded."""
    return " ".join(str(getattr(error, "orig", None) or error).lower().split())


def _refused_on_purpose(error: BaseException) -> bool:
    """True if libpq's message says the server refused the connection on purpose (credentials, database)."""
    message = _message(error)
    return any(words in message for words in _REFUSED_ON_PURPOSE)


def is_undefined_table(error: BaseException) -> bool:
    """True for a missing table or column: the queue's schema is not migrated."""
    return sqlstate(error) in ("42P01", "42703")


def is_insufficient_privilege(error: BaseException) -> bool:
    """True if the role lacks a privilege the statement needs (``42501``): a grant, not a retry, fixes it."""
    return sqlstate(error) == "42501"
