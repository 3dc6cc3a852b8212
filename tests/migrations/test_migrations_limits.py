"""Migration v10 (limits): its tables equal the mapped classes, it leaves the other tables alone and goes down
cleanly, a project's own migrations without it are not at head, and a job's key goes with its job."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from support.catalog import TRACE_TABLES, relation_names, snapshot
from test_migrations_control import checked_catalog

import alembic_venturi
from venturi_sa import make_models
from venturi_sa.models.limit_tables import LIMIT_TABLES

pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize("length", ["short", "longest"])
def test_v10_tables_equal_the_mapped_classes(engine: sa.Engine, prefix: str, length: str) -> None:
    migrated = checked_catalog(engine, prefix, length, LIMIT_TABLES, identity_table="limit_log")
    defs = {c[1]: c[3] for c in migrated["constraints"]}
    assert defs["{{prefix}}_limit_keys_job_id_fkey"].endswith("ON DELETE CASCADE")
    assert defs["{{prefix}}_limits_pkey"] == "PRIMARY KEY (kind, name)"
    indexes = {i[1]: i[2] for i in migrated["indexes"]}
    assert indexes["{{prefix}}_limit_starts_key"].endswith("USING btree (kind, key, at)")


def test_down_to_v9_drops_only_the_limit_tables(engine: sa.Engine, prefix: str) -> None:
    tables = ("jobs", "journal", *TRACE_TABLES)
    alembic_venturi.upgrade(engine, prefix, "v9")
    before = snapshot(engine, prefix, tables)
    alembic_venturi.upgrade(engine, prefix, "v10")
    assert {f"{prefix}_{t}" for t in LIMIT_TABLES} <= set(relation_names(engine, prefix))
    alembic_venturi.downgrade(engine, prefix, "v9")
    assert alembic_venturi.current(engine, prefix) == "v9"
    assert not {f"{prefix}_{t}" for t in LIMIT_TABLES} & set(relation_names(engine, prefix))
    assert snapshot(engine, prefix, tables) == before
    alembic_venturi.upgrade(engine, prefix, "v10")
    assert alembic_venturi.current(engine, prefix) == "v10"


def test_a_limit_key_goes_with_its_job(engine: sa.Engine, prefix: str) -> None:
    alembic_venturi.upgrade(engine, prefix, "v10")
    models = make_models(prefix)
    key = models.Limits.Key
    with engine.begin() as conn:
        conn.execute(sa.insert(models.jobs_table).values(id="j1", kind="k", payload={}))
        conn.execute(sa.insert(key).values(job_id="j1", kind="k", key="tenant-1"))
        conn.execute(sa.delete(models.jobs_table))
        assert conn.execute(sa.select(sa.func.count()).select_from(key)).scalar_one() == 0


def test_check_current_needs_the_limit_tables(engine: sa.Engine, prefix: str) -> None:
    models = make_models(prefix)
    for table in models.tables:
        if table not in models.Limits.tables:
            table.create(engine)
    with pytest.raises(alembic_venturi.runner.SchemaNotMigrated, match=f"missing {prefix}_limit_keys"):
        alembic_venturi.check_current(engine, prefix)
    for table in models.Limits.tables:
        table.create(engine)
    alembic_venturi.check_current(engine, prefix)
