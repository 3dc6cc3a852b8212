"""Keeping venturi's tables out of a project's own Alembic autogenerate.

Use this when venturi's own migrations (:func:`alembic_venturi.upgrade`)
manage the queue tables and the project's Alembic manages everything else::

    from alembic_venturi import exclude_venturi

    venturi = exclude_venturi("shop")
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        include_name=venturi.include_name,
        include_object=venturi.include_object,
    )

Autogenerate then neither creates, alters nor drops ``shop_jobs``,
``shop_journal``, the periodic-job tables ``shop_schedules`` and
``shop_fires``, the runtime-control tables ``shop_pauses``, ``shop_cancels``,
``shop_timeouts``, the owed-hook table ``shop_on_dead``, the trace-context table
``shop_traces``, the archive ``shop_archive`` with its day partitions and the dependency tables
``shop_waits`` and ``shop_parents``, their columns, indexes and constraints, or the
``shop_alembic_version`` table, whether they are in the database, in the
project's ``MetaData`` (via ``make_models("shop", Base)``), or both.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlalchemy.sql.schema import SchemaItem

from venturi_sa.models.limit_tables import LIMIT_TABLES
from venturi_sa.models.workflow_tables import parents_table_name, waits_table_name
from venturi_sa.prefix import Names

if TYPE_CHECKING:
    from alembic.runtime.environment import NameFilterParentNames, NameFilterType

_PARTITION = re.compile(r".+_[0-9]{8}")


@dataclass(frozen=True)
class VenturiFilter:
    """Alembic ``include_name`` / ``include_object`` hooks hiding some queues' tables."""

    tables: frozenset[str]
    archives: frozenset[str] = frozenset()
    """Archive tables (``<prefix>_archive``) whose day partitions (``<prefix>_archive_YYYYMMDD``) are hidden."""

    def _hidden(self, table: str | None) -> bool:
        if table in self.tables:
            return True
        return table is not None and _PARTITION.fullmatch(table) is not None and table[:-9] in self.archives

    def include_name(
        self, name: str | None, type_: NameFilterType, parent_names: NameFilterParentNames
    ) -> bool:
        """False for a venturi table (or version table) and anything inside one."""
        if type_ == "schema":
            return True
        if type_ == "table":
            return not self._hidden(name)
        return not self._hidden(parent_names.get("table_name"))

    def include_object(
        self,
        obj: SchemaItem,
        name: str | None,
        type_: NameFilterType,
        reflected: bool,
        compare_to: SchemaItem | None,
    ) -> bool:
        """False for a venturi table and its columns, indexes and constraints."""
        if type_ == "table":
            return not self._hidden(name)
        table = getattr(obj, "table", None)
        return not self._hidden(getattr(table, "name", None))


def exclude_venturi(*prefixes: str) -> VenturiFilter:
    """Hooks that leave the queues named by ``prefixes`` to venturi's own migrations.

    Each prefix is validated (``BadPrefix``, a ``ValueError``).  Covers the
    ``<prefix>_jobs``, ``<prefix>_journal``, ``<prefix>_schedules``,
    ``<prefix>_fires``, ``<prefix>_pauses``, ``<prefix>_cancels``, ``<prefix>_timeouts``,
    ``<prefix>_on_dead``, ``<prefix>_traces``, ``<prefix>_archive`` (and the archive's partitions),
    ``<prefix>_throttles``, ``<prefix>_waits``, ``<prefix>_parents``, ``<prefix>_steps`` and ``<prefix>_signals``
    tables with everything in them, and the ``<prefix>_alembic_version`` table; a
    project table that merely ends in ``_jobs`` is still the project's.
    """
    if not prefixes:
        raise ValueError("exclude_venturi() needs at least one queue prefix, e.g. exclude_venturi('shop')")
    tables: set[str] = set()
    for prefix in prefixes:
        names = Names(prefix)
        tables.update((names.jobs, names.journal, names.schedules, names.fires, names.pauses, names.cancels,
                       names.timeouts, names.on_dead, names.traces, names.archive, names.version_table,
                       names.index("throttles"), waits_table_name(names), parents_table_name(names),
                       names.index("steps"), names.index("signals")))
        tables.update(f"{prefix}_{table}" for table in LIMIT_TABLES)
    return VenturiFilter(frozenset(tables), frozenset(Names(p).archive for p in prefixes))


def archive_partitions(*prefixes: str) -> VenturiFilter:
    """Hooks that hide only the archive's day partitions of the queues named by ``prefixes``.

    For a project whose own Alembic manages the queue tables through
    ``make_models``: the mapped ``<prefix>_archive`` is the partitioned
    parent, while its partitions (``<prefix>_archive_YYYYMMDD``, attached and
    dropped by venturi at run time) are in no ``MetaData``; without these
    hooks autogenerate would write a ``drop_table`` for each of them.
    """
    if not prefixes:
        raise ValueError("archive_partitions() needs at least one queue prefix, e.g. archive_partitions('shop')")
    return VenturiFilter(frozenset(), frozenset(Names(p).archive for p in prefixes))
