"""Migration v9 (the archive): its table equals the mapped class, every derived name fits the prefix limit,
it leaves the other tables' catalogs alone, its down migration removes it with its partitions and resets
the jobs table's storage parameters, and a project's own Alembic drops none of the archive's partitions,
neither with ``alembic_venturi.archive_partitions`` nor without it (venturi's Alembic plugin)."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa
from support.catalog import TRACE_TABLES, relation_names, snapshot
from test_migrations_autogenerate import Project, operations
from test_migrations_control import checked_catalog

import alembic_venturi
from venturi_sa import make_models
from venturi_sa.storage import archive

pytestmark = pytest.mark.timeout(90)

RELOPTIONS = sa.text("SELECT coalesce(reloptions, '{}') FROM pg_class WHERE oid = to_regclass(:table)")


def reloptions(engine: sa.Engine, table: str) -> list[str]:
    with engine.connect() as conn:
        return list(conn.execute(RELOPTIONS, {"table": table}).scalar_one())


@pytest.mark.parametrize("length", ["short", "longest"])
def test_v9_table_equals_the_mapped_class(engine: sa.Engine, prefix: str, length: str) -> None:
    migrated = checked_catalog(engine, prefix, length, ("archive",))
    assert [c[1] for c in migrated["columns"]] == [
        "id", "kind", "status", "created_at", "finished_at", "moved_at", "job", "journal", "timeout", "trace",
        "steps", "signals", "limit_key"]  # v14's three
    indexes = {i[1]: i[2] for i in migrated["indexes"]}
    assert indexes["{{prefix}}_archive_created"].endswith("USING btree (created_at, id)")
    defs = {c[1]: c[3] for c in migrated["constraints"]}
    assert defs["{{prefix}}_archive_pkey"] == "PRIMARY KEY (id, moved_at)"


def test_v9_sets_storage_parameters_and_its_down_migration_resets_them(engine: sa.Engine, prefix: str) -> None:
    tables = ("jobs", "journal", *TRACE_TABLES)
    alembic_venturi.upgrade(engine, prefix, "v8")
    before = snapshot(engine, prefix, tables)
    assert reloptions(engine, f"{prefix}_jobs") == []
    alembic_venturi.upgrade(engine, prefix, "v9")
    assert alembic_venturi.current(engine, prefix) == "v9"
    assert "fillfactor=90" in reloptions(engine, f"{prefix}_jobs")
    assert snapshot(engine, prefix, tables) == before  # columns, constraints and indexes untouched
    models = make_models(prefix)
    with sa.orm.Session(engine) as session, session.begin():
        made = archive.ensure_partitions(models, session)
    assert len(made) == 2 and set(made) <= relation_names(engine, prefix)
    alembic_venturi.downgrade(engine, prefix, "v8")
    assert alembic_venturi.current(engine, prefix) == "v8"
    names = relation_names(engine, prefix)
    assert f"{prefix}_archive" not in names and not set(made) & names
    assert reloptions(engine, f"{prefix}_jobs") == []
    assert snapshot(engine, prefix, tables) == before


def test_check_current_needs_the_archive(engine: sa.Engine, prefix: str) -> None:
    models = make_models(prefix)
    for table in models.tables:
        if table is not models.archive_table:
            table.create(engine)
    with pytest.raises(alembic_venturi.runner.SchemaNotMigrated, match=f"missing {prefix}_archive"):
        alembic_venturi.check_current(engine, prefix)
    models.archive_table.create(engine)
    alembic_venturi.check_current(engine, prefix)


PARTITION_FILTER = '''\
from alembic_venturi import archive_partitions

venturi = archive_partitions("shop")
'''


def test_autogenerate_with_partitions_attached_is_a_no_op_with_or_without_the_partition_filter(
        tmp_path: Path, fresh_db_url: str) -> None:
    """A project's own Alembic (make_models): partitions attached at run time are not the project's."""
    project = Project(tmp_path, fresh_db_url, with_models=True, with_filter=False)
    first = project.autogenerate("orders and the shop queue")
    assert "op.create_table('shop_archive'" in first and "postgresql_partition_by='RANGE (moved_at)'" in first
    project.alembic("upgrade", "head")
    engine = sa.create_engine(fresh_db_url, poolclass=sa.pool.NullPool)
    try:
        with sa.orm.Session(engine) as session, session.begin():
            made = archive.ensure_partitions(make_models("shop"), session)
    finally:
        engine.dispose()
    assert made
    assert operations(project.autogenerate("partitions seen")) == []  # venturi's Alembic plugin
    for path in (tmp_path / "migrations" / "versions").glob("*partitions_seen*.py"):
        path.unlink()
    env = tmp_path / "migrations" / "env.py"
    env.write_text(env.read_text().replace("import models\n", "import models\n" + PARTITION_FILTER).replace(
        "compare_server_default=True,", "compare_server_default=True,\n        include_name=venturi.include_name, "
        "include_object=venturi.include_object,"))
    assert operations(project.autogenerate("nothing changed")) == []


def test_exclude_venturi_hides_the_archive_and_its_partitions() -> None:
    venturi = alembic_venturi.exclude_venturi("shop")
    for table in ("shop_archive", "shop_archive_20261202"):
        assert not venturi.include_name(table, "table", {"schema_name": None})
    assert not venturi.include_name("shop_archive_20261202_pkey", "index", {"table_name": "shop_archive_20261202"})
    assert venturi.include_name("shop_archive_2026", "table", {"schema_name": None})
    only = alembic_venturi.archive_partitions("shop")
    assert only.include_name("shop_archive", "table", {"schema_name": None})
    assert not only.include_name("shop_archive_20261202", "table", {"schema_name": None})
    assert only.include_name("billing_archive_20261202", "table", {"schema_name": None})
