"""Autogenerate never drops a venturi queue's tables: an Alembic plugin.

A project's ``alembic revision --autogenerate`` (or ``flask db migrate``)
writes a ``drop_table`` for every table in the database that is not in its
``target_metadata``.  Three kinds of venturi's tables are there by design or
by a slip: the archive's day partitions (``<prefix>_archive_YYYYMMDD``),
which workers attach at run time and no ``MetaData`` holds; every table of a
queue that venturi's own migrations manage (with its
``<prefix>_alembic_version``); and every table of a queue whose ``env.py``
forgot to import the module that calls ``make_models``.

The plugin's comparator runs after Alembic's own table comparison and
removes the ``DropTableOp`` (and the index drops before it) of each such
table, logging what it kept.  A queue is recognised in the database, never by
name alone: its ``<prefix>_jobs`` and ``<prefix>_journal`` tables exist, and
either its ``<prefix>_alembic_version`` table or the index
``<prefix>_jobs_claim`` does.  Drops inside a table that ``target_metadata``
holds (an index a venturi release removed, say) are left as they are.

Alembic 1.18 and later load the plugin through the ``alembic.plugins`` entry
point when ``alembic`` is imported, under a name that Alembic's default
``autogenerate_plugins`` includes (:data:`PLUGIN_NAME`), so no ``env.py``
names it.  Older Alembic has no plugins: :func:`guard_autogenerate`, called
once in ``env.py`` (or the Flask app factory), puts the same comparator on
Alembic's global registry; or pass ``exclude_venturi`` / ``archive_partitions``.
"""

from __future__ import annotations

import functools
import logging
import types
from collections.abc import Callable, Collection, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from alembic_venturi.filters import exclude_venturi
from venturi_sa.errors import BadPrefix
from venturi_sa.prefix import Names

if TYPE_CHECKING:
    from alembic.autogenerate.api import AutogenContext
    from alembic.operations.ops import UpgradeOps
    from alembic.runtime.plugins import Plugin

PLUGIN_NAME = "alembic.autogenerate.venturi"
"""The plugin's name (its entry point's in the ``alembic.plugins`` group).

Alembic runs a plugin's comparators only where ``autogenerate_plugins``
matches its name, and that list defaults to ``["alembic.autogenerate.*"]``:
the name places the plugin in the default set, so an ``env.py`` that names no
plugin runs it, and ``"~alembic.autogenerate.venturi"`` in the list leaves it out.
"""

# A child of Alembic's own logger, so that the logging set-up of alembic.ini (and Flask-Migrate's)
# prints the routine lines beside Alembic's "Detected removed table ..."; a warning is printed.
log = logging.getLogger("alembic.autogenerate.venturi")


@dataclass(frozen=True)
class Queue:
    """A venturi queue found in the database, and its tables that autogenerate would drop."""

    prefix: str
    own_migrations: bool
    """True when ``<prefix>_alembic_version`` exists: venturi's migrations manage the queue."""
    kept: tuple[str, ...]

    def message(self) -> tuple[int, str]:
        """The log level and line that says what was kept, and why."""
        names = Names(self.prefix)
        listed = ", ".join(self.kept)
        if self.own_migrations:
            return logging.INFO, (
                f"venturi: not dropping the tables of queue {self.prefix!r} ({listed}): venturi's own "
                f"migrations manage them ({names.version_table} exists)")
        if all(table.startswith(f"{names.archive}_") for table in self.kept):
            return logging.INFO, (
                f"venturi: not dropping {listed}: the day partitions of {names.archive}, which venturi's "
                "workers attach and its cleanup drops")
        return logging.WARNING, (
            f"venturi: not dropping the tables of queue {self.prefix!r} ({listed}): they are in the database "
            "but not in "
            f"target_metadata, and there is no {names.version_table} table (so your own migrations manage "
            f"them). env.py does not import the module that calls make_models({self.prefix!r}, ...): import "
            "it there, or the next venturi schema change will not reach your migrations "
            "(docs/migrations.md, 'env.py must import the module that calls make_models')")


def find_queues(dropped: Iterable[str], present: Collection[str],
                indexes_of: Callable[[str], Collection[str]]) -> list[Queue]:
    """The venturi queues whose tables are among ``dropped``.

    ``present`` is every table name in the database's schema, ``indexes_of``
    gives a table's index names.  A prefix counts only when its jobs and
    journal tables exist and it carries venturi's version table or claim
    index, so a project's own ``orders_jobs`` is still the project's.
    """
    dropped = sorted(set(dropped))
    queues = []
    for prefix in sorted({table[:-len("_jobs")] for table in present if table.endswith("_jobs")}):
        try:
            names = Names(prefix)
        except BadPrefix:
            continue
        if names.journal not in present:
            continue
        own_migrations = names.version_table in present
        if not own_migrations and names.index("jobs_claim") not in indexes_of(names.jobs):
            continue
        hidden = exclude_venturi(prefix)
        kept = tuple(t for t in dropped if not hidden.include_name(t, "table", {"schema_name": None}))
        if kept:
            queues.append(Queue(prefix, own_migrations, kept))
    return queues


def keep_venturi_tables(autogen_context: AutogenContext, upgrade_ops: UpgradeOps,
                        schemas: set[str | None]) -> None:
    """The comparator: remove the drops of venturi's tables from ``upgrade_ops``, and say so."""
    from alembic.operations.ops import DropTableOp, ModifyTableOps
    from alembic.util import msg

    by_schema: dict[str | None, set[str]] = {}
    for op in upgrade_ops.ops:
        if isinstance(op, DropTableOp):
            by_schema.setdefault(op.schema, set()).add(op.table_name)
    if not by_schema:
        return
    inspector = autogen_context.inspector
    kept: set[tuple[str | None, str]] = set()
    for schema, dropped in by_schema.items():
        present = set(inspector.get_table_names(schema=schema))

        def indexes_of(table: str, schema: str | None = schema) -> set[str]:
            return {str(index["name"]) for index in inspector.get_indexes(table, schema=schema)}

        for queue in find_queues(dropped, present, indexes_of):
            level, line = queue.message()
            if level >= logging.WARNING:  # printed like "Generating ...", whatever the logging set-up
                msg(f"  WARNING {line}")
            else:
                log.log(level, line)
            kept.update((schema, table) for table in queue.kept)
    upgrade_ops.ops = [
        op for op in upgrade_ops.ops
        if not (isinstance(op, (DropTableOp, ModifyTableOps)) and (op.schema, op.table_name) in kept)
    ]


def _setup(plugin: Plugin) -> None:
    from alembic.util import DispatchPriority, PriorityDispatchResult

    def compare(autogen_context: AutogenContext, upgrade_ops: UpgradeOps,
                schemas: set[str | None]) -> PriorityDispatchResult:
        keep_venturi_tables(autogen_context, upgrade_ops, schemas)
        return PriorityDispatchResult.CONTINUE

    _loaded_as_plugin.append(plugin.name)
    plugin.add_autogenerate_comparator(compare, "schema", "venturi", qualifier="postgresql",
                                       priority=DispatchPriority.LAST)


class _PluginModule(types.ModuleType):
    """What the ``alembic.plugins`` entry point names: a module whose ``setup()`` Alembic calls.

    Alembic 1.20 calls ``setup()`` of a module; 1.18 and 1.19 iterated the
    entry point's object and called ``setup()`` of each item, so it also
    iterates as itself.
    """

    def __iter__(self) -> Iterator[types.ModuleType]:
        yield self

    @staticmethod
    def setup(plugin: Plugin) -> None:
        """Register the comparator on ``plugin``, after Alembic's own table comparison."""
        _setup(plugin)


PLUGIN = _PluginModule(f"{__name__}.PLUGIN", "venturi's Alembic plugin (alembic.autogenerate.venturi)")
_loaded_as_plugin: list[str] = []


@functools.cache
def guard_autogenerate() -> None:
    """Keep venturi's tables out of the drops of every autogenerate run in this process (Alembic < 1.18).

    Idempotent, and a no-op where Alembic loaded the plugin through its entry
    point (1.18+).  On older Alembic call it once before autogenerate runs
    (``env.py``, or the Flask app factory for Flask-Migrate).  It changes what
    autogenerate proposes, never the database.
    """
    if _loaded_as_plugin:
        return
    from alembic.autogenerate import compare

    try:
        from alembic.util import DispatchPriority
    except ImportError:  # Alembic < 1.18: a list dispatcher, run in registration order (after Alembic's own)
        compare.comparators.dispatch_for("schema")(keep_venturi_tables)
    else:
        compare.comparators.dispatch_for("schema", priority=DispatchPriority.LAST)(keep_venturi_tables)
