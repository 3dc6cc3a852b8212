"""The test clock: moving the database clock of one transaction, for tests only.

Every time venturi's SQL uses to decide eligibility, delays, backoff, lease
expiry and recovery comes from three unqualified database functions:
``now()``, ``statement_timestamp()`` and ``clock_timestamp()`` (claim,
soonest visible, outcomes, enqueue, leases, stats, cleanup, admin, and the
mapped classes' column defaults).  The test clock does not change those
statements: it *shadows the three functions* for one transaction.

:func:`engage` creates (in the caller's transaction) a schema
``venturi_clock_<backend pid>`` holding functions of those three names and
puts it ahead of ``pg_catalog`` on the **transaction-local** ``search_path``.
Each function returns the time frozen in the transaction-local setting
``venturi.now`` if it is set; otherwise it is *live*: ``now()`` returns the
current time (``clock_timestamp()``, not the transaction's start, so jobs
enqueued earlier in the same transaction are eligible) and the other two
return their usual values.  Commit or rollback ends it; a rolled-back
savepoint undoes the part set inside it.  No other connection or
transaction sees any of it, and production statements are byte-for-byte
what they were, so the clock costs production nothing.

What it does not move: ``pg_catalog.now()``, ``CURRENT_TIMESTAMP`` (an SQL
keyword, not a function call), and column ``DEFAULT now()`` clauses of
tables (PostgreSQL bound those to ``pg_catalog.now`` when the table was
created).  Engaging needs the ``CREATE`` privilege on the database.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa

from venturi_sa.storage.params import Runner

SCHEMA_PREFIX = "venturi_clock_"
FROZEN = "venturi.now"  # transaction-local: the frozen time, '' or unset when live
SAVED_PATH = "venturi.saved_search_path"  # transaction-local: search_path before engage()

_SCHEMA = f"pg_catalog.quote_ident('{SCHEMA_PREFIX}' || pg_catalog.pg_backend_pid())"
_FROZEN = f"nullif(pg_catalog.current_setting('{FROZEN}', true), '')::timestamptz"


def _function(name: str, live: str) -> str:
    """``CREATE OR REPLACE FUNCTION <schema>.name()`` as an ``EXECUTE`` in the engage block."""
    body = f"SELECT coalesce({_FROZEN}, {live})".replace("'", "''")
    return (f"EXECUTE pg_catalog.format('CREATE OR REPLACE FUNCTION %s.{name}() RETURNS timestamptz "
            f"LANGUAGE sql STABLE AS $body$ {body} $body$', s);")


# One statement without bind parameters, so it runs the same on every driver.
_ENGAGE = sa.text(f"""
DO $venturi_clock$
DECLARE
    s text := {_SCHEMA};
    path text := pg_catalog.current_setting('search_path');
BEGIN
    IF pg_catalog.to_regprocedure(s || '.statement_timestamp()') IS NULL THEN
        EXECUTE pg_catalog.format('CREATE SCHEMA IF NOT EXISTS %s', s);
        {_function("now", "pg_catalog.clock_timestamp()")}
        {_function("statement_timestamp", "pg_catalog.statement_timestamp()")}
        {_function("clock_timestamp", "pg_catalog.clock_timestamp()")}
    END IF;
    IF pg_catalog.strpos(path, s || ', pg_catalog') <> 1 THEN
        PERFORM pg_catalog.set_config('{SAVED_PATH}', path, true);
        PERFORM pg_catalog.set_config('search_path', s || ', pg_catalog, ' || path, true);
    END IF;
END
$venturi_clock$
""".replace(":", "\\:"))

_ENGAGED = sa.text(
    f"SELECT pg_catalog.strpos(pg_catalog.current_setting('search_path'), {_SCHEMA} || ', pg_catalog') = 1")


def engage(runner: Runner) -> None:
    """Shadow the clock functions for the rest of ``runner``'s transaction (live until frozen)."""
    runner.execute(_ENGAGE)


def engaged(runner: Runner) -> bool:
    """Whether the test clock shadows the database clock in this transaction."""
    return bool(runner.execute(_ENGAGED).scalar_one())


def freeze(runner: Runner, at: datetime) -> None:
    """Stop the engaged clock at ``at`` (timezone-aware): the three functions all return it."""
    runner.execute(sa.select(sa.func.set_config(FROZEN, at.isoformat(), True)))


def frozen_at(runner: Runner) -> datetime | None:
    """The frozen time, or None if the clock is live or not engaged."""
    value: Any = runner.execute(sa.text(f"SELECT {_FROZEN}")).scalar_one()
    return value if isinstance(value, datetime) else None


def current_time(runner: Runner) -> datetime:
    """``statement_timestamp()``: the database clock now, as venturi's statements would read it."""
    value: datetime = runner.execute(sa.select(sa.func.statement_timestamp())).scalar_one()
    return value


def disengage(runner: Runner) -> None:
    """Give this transaction its real clock back and drop the shadowing schema."""
    runner.execute(sa.text(
        f"SELECT pg_catalog.set_config('search_path', pg_catalog.current_setting('{SAVED_PATH}'), true), "
        f"pg_catalog.set_config('{FROZEN}', '', true) "
        f"WHERE pg_catalog.strpos(pg_catalog.current_setting('search_path'), {_SCHEMA} || ', pg_catalog') = 1"))
    runner.execute(sa.text(f"""
DO $venturi_clock$
BEGIN
    EXECUTE pg_catalog.format('DROP SCHEMA IF EXISTS %s CASCADE', {_SCHEMA});
END
$venturi_clock$
""".replace(":", "\\:")))


__all__ = ["current_time", "disengage", "engage", "engaged", "freeze", "frozen_at"]
