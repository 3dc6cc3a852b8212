"""A connection one worker thread keeps between its transactions (the claim loop, the outcome batch writer).

The worker's own statements run at READ COMMITTED whatever the engine's
default, through an engine with that ``isolation_level`` execution option:
SQLAlchemy sets the level on every checkout and resets it on every checkin.
For the two threads that run a transaction every few milliseconds (claims
and outcome batches) that round of pool checkout, isolation set and reset
cost more CPU than the transaction's own statement (about 145 µs against 75
µs of CPU per one-statement transaction, psycopg2).  Each of them keeps one
connection instead, checked out on first use and set once.

Each transaction is still ``BEGIN``, the statement, ``COMMIT`` (nothing
stays open between them).  Any error drops the connection: it is closed
(returned to the pool, or discarded if it died) and the next transaction
checks out another, so a server restart is handled as with a pooled
connection per transaction.  :meth:`HeldConnection.close` returns it when
the thread stops.  Only a sync engine's runner is held; an async engine's
transactions already run on the worker loop (:mod:`~venturi_sa.worker.engines`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TypeVar

import sqlalchemy as sa

from venturi_sa.worker.engines import Connections, SyncConnections

T = TypeVar("T")
logger = logging.getLogger("venturi_sa.worker")


class HeldConnection:
    """A :class:`~venturi_sa.worker.engines.Connections` runner on one kept connection; one thread uses it."""

    def __init__(self, engine: sa.Engine) -> None:
        self.engine = engine
        self._conn: sa.Connection | None = None

    def _connection(self) -> sa.Connection:
        conn = self._conn
        if conn is None or conn.closed or conn.invalidated:
            if conn is not None:
                self._drop()
            conn = self._conn = self.engine.connect()
        return conn

    def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except Exception:  # noqa: BLE001 - a dead connection's close must not hide the error that killed it
                logger.debug("closing a dropped worker connection failed", exc_info=True)

    def begin(self, fn: Callable[[sa.Connection], T]) -> T:
        """``fn(conn)`` in a transaction committed when it returns (rolled back, and the connection dropped, if not)."""
        conn = self._connection()
        try:
            with conn.begin():
                return fn(conn)
        except BaseException:
            self._drop()
            raise

    def connect(self, fn: Callable[[sa.Connection], T]) -> T:
        """``fn(conn)``; whatever it began is rolled back afterwards."""
        conn = self._connection()
        try:
            result = fn(conn)
            if conn.in_transaction():
                conn.rollback()
            return result
        except BaseException:
            self._drop()
            raise

    def close(self) -> None:
        """Return the kept connection to the pool (the thread is done with it)."""
        self._drop()


def held(conns: Connections) -> Connections:
    """A kept-connection runner on ``conns``'s engine if it is a sync engine's runner, else ``conns``."""
    if isinstance(conns, SyncConnections):
        return HeldConnection(conns.engine)
    return conns


def release(conns: Connections) -> None:
    """Return ``conns``'s kept connection, if it keeps one."""
    if isinstance(conns, HeldConnection):
        conns.close()
