"""Applying venturi's migrations to one queue prefix: upgrade, downgrade, inspect.

Every entry point validates the prefix before it builds an Alembic ``Config``,
an engine or any SQL.  Upgrades and downgrades of one prefix are serialized
across processes by a PostgreSQL advisory lock keyed by the prefix, and each
one runs in a single transaction: it is committed when the call returns, and
rolled back entirely if it raises (PostgreSQL DDL is transactional).  A
process that dies mid-migration leaves nothing behind: PostgreSQL rolls its
transaction back and frees its lock with the connection.
"""

from __future__ import annotations

import hashlib
import io
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, TypeAlias

import sqlalchemy as sa
from sqlalchemy.engine import URL, Connection, Engine
from sqlalchemy.pool import NullPool

from alembic_venturi.bodies import CONNECTION_ATTRIBUTE, PREFIX_ATTRIBUTE
from venturi_sa.errors import SchemaNotMigrated, VenturiError
from venturi_sa.prefix import Names

if TYPE_CHECKING:  # Alembic itself is imported where a migration or a check runs, not at import
    from alembic.config import Config

HEAD = "v14"
REVISIONS: tuple[str, ...] = ("v1", "v2", "v3", "v4", "v5", "v6", "v7", "v8", "v9", "v10", "v11", "v12",
                              "v13", "v14")
SCRIPT_LOCATION = os.path.dirname(os.path.abspath(__file__))
# Index names (after the prefix) that exist at HEAD, and ones that must not.
HEAD_INDEXES: tuple[str, ...] = (
    "jobs_claim", "jobs_claim_priority", "jobs_visible", "jobs_dedup", "jobs_lease",
    "jobs_history", "jobs_finished", "jobs_created", "journal_job",
)
# Tables (after the prefix) that exist at HEAD besides the two seed tables, and their indexes.
HEAD_TABLES: tuple[str, ...] = ("schedules", "fires", "pauses", "cancels", "timeouts", "on_dead", "traces",
                               "archive", "limit_keys", "limits", "limit_log", "limit_starts", "limit_turns",
                               "throttles", "waits", "parents", "steps", "signals")
HEAD_TABLE_INDEXES: tuple[str, ...] = ("schedules_due", "fires_job", "pauses_open", "on_dead_job",
                                       "archive_created", "archive_history", "archive_finished",
                                       "limit_starts_kind", "limit_starts_key", "parents_parent")
PRE_HEAD_INDEXES: tuple[str, ...] = ("journal_kind",)
# Columns (table after the prefix, column) that later migrations added to tables of earlier ones.
HEAD_COLUMNS: tuple[tuple[str, str], ...] = (("archive", "steps"), ("archive", "signals"),  # v14's
                                              ("archive", "limit_key"))
# What :func:`current` reports, when asked, for a queue whose tables exist without a version table.
APP_MANAGED = "app-managed"

Bind: TypeAlias = Engine | Connection | str | URL


class OpenTransaction(VenturiError):
    """A Connection handed to a migration already has a transaction open."""


def lock_key(prefix: str) -> int:
    """The signed 64-bit advisory-lock key that serializes migrations of ``prefix``.

    A stable digest, identical in every process (unlike ``hash()``).
    """
    digest = hashlib.blake2b(f"venturi-migrate\0{prefix}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


@contextmanager
def _connection(bind_or_url: Bind) -> Iterator[Connection]:
    """A Connection for ``bind_or_url``; one we open is closed (and its engine disposed)."""
    if isinstance(bind_or_url, Connection):
        yield bind_or_url
    elif isinstance(bind_or_url, Engine):
        with bind_or_url.connect() as connection:
            yield connection
    elif isinstance(bind_or_url, (str, URL)):
        engine = sa.create_engine(bind_or_url, poolclass=NullPool)
        try:
            with engine.connect() as connection:
                yield connection
        finally:
            engine.dispose()
    else:
        raise TypeError(
            f"expected an Engine, a Connection or a database URL, got {type(bind_or_url).__name__}"
        )


def _config(names: Names, connection: Connection | None = None,
            output: io.StringIO | None = None) -> Config:
    from alembic.config import Config

    config = Config(output_buffer=output)
    config.set_main_option("script_location", SCRIPT_LOCATION.replace("%", "%%"))
    config.attributes[PREFIX_ATTRIBUTE] = names.prefix
    if connection is not None:
        config.attributes[CONNECTION_ATTRIBUTE] = connection
    return config


def _revision_of(connection: Connection, names: Names) -> str | None:
    from alembic.runtime.migration import MigrationContext

    context = MigrationContext.configure(connection, opts={"version_table": names.version_table})
    return context.get_current_revision()


def _locked_migration(connection: Connection, names: Names,
                      step: Callable[[Config], None]) -> None:
    """Run ``step`` in one committed transaction, holding the prefix's migration lock.

    The lock is session-level and taken *before* the transaction begins, so
    the transaction's snapshot (at any isolation level) already sees what a
    previous holder committed; it is released before returning.
    """
    if connection.in_transaction():
        raise OpenTransaction(
            f"cannot migrate queue {names.prefix!r} on a Connection with an open transaction "
            "(it would not be committed); commit or roll back first, or pass the Engine"
        )
    key = lock_key(names.prefix)
    connection.execute(sa.select(sa.func.pg_advisory_lock(key)))
    connection.commit()
    try:
        with connection.begin():
            step(_config(names, connection))
    finally:
        if not connection.invalidated:
            connection.execute(sa.select(sa.func.pg_advisory_unlock(key)))
            connection.commit()


def upgrade(bind_or_url: Bind, prefix: str, revision: str = "head") -> None:
    """Migrate queue ``prefix`` up to ``revision`` (default: head).

    ``bind_or_url`` is an Engine, a Connection without an open transaction
    (else :class:`OpenTransaction`), or a URL.  The prefix is validated
    first (``BadPrefix``, a ``ValueError``; nothing is touched).  The whole
    upgrade commits before this returns, or rolls back if it raises.
    Concurrent upgrades of one prefix, from any number of processes, wait
    for each other and all succeed; other prefixes are not touched.
    """
    names = Names(prefix)
    with _connection(bind_or_url) as connection:
        from alembic import command

        _locked_migration(connection, names, lambda config: command.upgrade(config, revision))


def downgrade(bind_or_url: Bind, prefix: str, revision: str) -> None:
    """Migrate queue ``prefix`` down to ``revision``, in one transaction.

    ``"base"`` drops the queue's tables, with every job and journal row,
    and its ``<prefix>_alembic_version`` table; nothing else in the
    database is touched.  Same arguments and guarantees as :func:`upgrade`.
    """
    names = Names(prefix)
    with _connection(bind_or_url) as connection:

        def step(config: Config) -> None:
            from alembic import command

            command.downgrade(config, revision)
            if _revision_of(connection, names) is None:
                table = connection.dialect.identifier_preparer.quote(names.version_table)
                connection.execute(sa.text(f"DROP TABLE IF EXISTS {table}"))

        _locked_migration(connection, names, step)


def current(bind_or_url: Bind, prefix: str, *, report_app_managed: bool = False) -> str | None:
    """The revision queue ``prefix`` is at (``"v1"`` ... ``HEAD``), or None if never migrated.

    A queue whose tables the project's own migrations created has no
    ``<prefix>_alembic_version`` table, so it reads as None too, unless
    ``report_app_managed`` is true: then it reads as :data:`APP_MANAGED`
    (``"app-managed"``), whether or not its tables are at head (see
    :func:`check_current`).  Read-only.  A Connection's open transaction is
    left open; one this call had to begin is rolled back.
    """
    names = Names(prefix)
    with _connection(bind_or_url) as connection, _reading(connection):
        revision = _revision_of(connection, names)
        if revision is None and report_app_managed and _has_jobs_table(connection, names):
            return APP_MANAGED
        return revision


def _has_jobs_table(connection: Connection, names: Names) -> bool:
    """Whether ``<prefix>_jobs`` is visible on the connection's search path."""
    return connection.execute(
        sa.text("SELECT to_regclass(:name) IS NOT NULL"),
        {"name": connection.dialect.identifier_preparer.quote(names.jobs)},
    ).scalar_one() is True


def stamp(bind_or_url: Bind, prefix: str) -> None:
    """Record :data:`HEAD` in ``<prefix>_alembic_version`` for a queue the project's migrations created.

    For switching an app-managed queue (:data:`APP_MANAGED`) to venturi's
    migrations: no table is created or altered.  Raises ``SchemaNotMigrated``
    (nothing written) if the tables are not at head by :func:`check_current`'s
    rules, and ``VenturiError`` if the queue has no tables or already has a
    version table.  Same arguments, lock and one-transaction guarantee as
    :func:`upgrade`: the stamp commits before this returns, or is rolled back.
    """
    names = Names(prefix)
    with _connection(bind_or_url) as connection:

        def step(config: Config) -> None:
            from alembic import command

            revision = _revision_of(connection, names)
            if revision is not None:
                raise VenturiError(f"queue {prefix!r} is already tracked by venturi (at {revision}); "
                                   "nothing to stamp")
            if not _has_jobs_table(connection, names):
                raise VenturiError(f"queue {prefix!r} has no tables to stamp; {fix_hint(prefix)}")
            check_current(connection, prefix)
            command.stamp(config, HEAD)

        _locked_migration(connection, names, step)


@contextmanager
def _reading(connection: Connection) -> Iterator[None]:
    """Leave ``connection``'s transaction state as it was found."""
    began = not connection.in_transaction()
    try:
        yield
    finally:
        if began and connection.in_transaction():
            connection.rollback()


def _head_shape_gaps(connection: Connection, names: Names) -> tuple[list[str], list[str]]:
    """Head table and index names absent from, and removed ones present in, the visible schema."""
    wanted = [names.jobs, names.journal, *(names.index(s) for s in HEAD_INDEXES),
              *(names.index(s) for s in HEAD_TABLES + HEAD_TABLE_INDEXES)]
    unwanted = [names.index(s) for s in PRE_HEAD_INDEXES]
    found = set(connection.execute(
        sa.text("SELECT relname FROM pg_class WHERE relname = ANY(:names) "
                "AND pg_table_is_visible(oid)"),
        {"names": wanted + unwanted},
    ).scalars())
    columns = [f"{names.index(table)}.{column}" for table, column in HEAD_COLUMNS]
    found.update(connection.execute(
        sa.text("SELECT c.relname || '.' || a.attname FROM pg_attribute AS a JOIN pg_class AS c ON c.oid = a.attrelid "
                "WHERE c.relname || '.' || a.attname = ANY(:columns) AND pg_table_is_visible(c.oid) "
                "AND a.attnum > 0 AND NOT a.attisdropped"),
        {"columns": columns},
    ).scalars())
    wanted += [c for c in columns if c.split(".")[0] in found]  # a missing table is named once, as a table
    return [n for n in wanted if n not in found], [n for n in unwanted if n in found]


def fix_hint(prefix: str) -> str:
    """How to bring queue ``prefix``'s tables to head, for both migration paths."""
    return (f"run `venturi migrate --prefix {prefix}` (or alembic_venturi.upgrade(engine, {prefix!r})), "
            "or your own Alembic upgrade (e.g. `alembic upgrade head`, `flask db upgrade`) "
            "if the queue's tables are in your models")


def autogenerate_hint(prefix: str) -> str:
    """Why a project's own autogenerate may have left queue ``prefix``'s tables out."""
    return (f"if your own Alembic manages the queue, its env.py must import the module that calls "
            f"make_models({prefix!r}, ...) before autogenerate, or autogenerate leaves the queue's tables out "
            "(see docs/migrations.md)")


def check_current(bind_or_url: Bind, prefix: str) -> None:
    """Return if queue ``prefix`` is at :data:`HEAD`, else raise ``SchemaNotMigrated``.

    A queue migrated by venturi is checked by its version table.  A queue
    whose tables a project's own Alembic created (no version table) passes
    when every head table, index and added column exists and no removed index does.
    Read-only, like :func:`current`.
    """
    names = Names(prefix)
    fix = fix_hint(prefix)
    with _connection(bind_or_url) as connection, _reading(connection):
        revision = _revision_of(connection, names)
        if revision == HEAD:
            return
        if revision in REVISIONS:
            raise SchemaNotMigrated(f"queue {prefix!r} is at {revision}, this venturi needs {HEAD}; {fix}")
        if revision is not None:
            raise SchemaNotMigrated(
                f"queue {prefix!r} is at {revision!r}, a revision this venturi does not know "
                f"(it knows up to {HEAD}); upgrade venturi"
            )
        absent, present = _head_shape_gaps(connection, names)
    if names.jobs in absent:
        raise SchemaNotMigrated(
            f"queue {prefix!r} is not migrated (no {names.jobs} table): either venturi's migrations were "
            f"never run for it, or {autogenerate_hint(prefix)}, or this is another database or prefix; {fix}"
        )
    if absent or present:
        problems = [f"missing {n}" for n in absent] + [f"unexpected {n}" for n in present]
        raise SchemaNotMigrated(
            f"queue {prefix!r} has no {names.version_table} table and its tables are not at "
            f"{HEAD} ({', '.join(problems)}); {fix} (autogenerate adds the changes; "
            f"{autogenerate_hint(prefix)})"
        )


def offline_sql(prefix: str, revision: str = "head") -> str:
    """The SQL script that migrates an empty database's queue ``prefix`` to ``revision``.

    No database is contacted.  The script is one ``BEGIN`` ... ``COMMIT``
    transaction for ``psql``; it also creates and fills the queue's version
    table, so :func:`upgrade` later continues from where it left off.
    ``revision`` may be a range, e.g. ``"v1:v3"``.
    """
    names = Names(prefix)
    output = io.StringIO()
    from alembic import command

    command.upgrade(_config(names, output=output), revision, sql=True)
    return output.getvalue()
