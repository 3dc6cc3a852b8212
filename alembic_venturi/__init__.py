"""venturi's migrations, and its integration with a project's own Alembic.

Two ways in (see ``docs/migrations.md``):

* venturi's own migrations: :func:`upgrade` (or ``venturi migrate``) applies
  the SQL bodies ``v1`` ... :data:`HEAD` for one queue prefix, tracked in
  that queue's ``<prefix>_alembic_version`` table; :func:`offline_sql`
  writes the same DDL as a script for a DBA; :func:`stamp` hands a queue the
  project's migrations created (:data:`APP_MANAGED`) over to them.
* the project's Alembic: ``venturi_sa.make_models(prefix, Base)`` puts the
  tables in the project's ``MetaData`` for autogenerate, or
  :func:`exclude_venturi` keeps autogenerate away from them.  Whatever
  ``env.py`` says, autogenerate never drops a queue's tables
  (:mod:`alembic_venturi.autogenerate_guard`, an Alembic plugin on 1.18+,
  :func:`guard_autogenerate` on older Alembic).

Workers and the CLI call :func:`check_current` before touching a queue.
"""

from __future__ import annotations

from alembic_venturi.autogenerate_guard import guard_autogenerate
from alembic_venturi.filters import VenturiFilter, archive_partitions, exclude_venturi
from alembic_venturi.runner import (
    APP_MANAGED,
    HEAD,
    REVISIONS,
    Bind,
    OpenTransaction,
    check_current,
    current,
    downgrade,
    lock_key,
    offline_sql,
    stamp,
    upgrade,
)

__all__ = [
    "APP_MANAGED",
    "HEAD",
    "REVISIONS",
    "Bind",
    "OpenTransaction",
    "VenturiFilter",
    "archive_partitions",
    "check_current",
    "current",
    "downgrade",
    "exclude_venturi",
    "guard_autogenerate",
    "lock_key",
    "offline_sql",
    "stamp",
    "upgrade",
]
