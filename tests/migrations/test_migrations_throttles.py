"""Migration v11 (throttle starts): its table equals the mapped class, every derived name fits the prefix
limit, it leaves the other tables alone, and a project's own migrations without it are not at head."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from support.catalog import THROTTLE_TABLES, TRACE_TABLES, relation_names, snapshot
from test_migrations_control import checked_catalog

import alembic_venturi
from venturi_sa import make_models

pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize("length", ["short", "longest"])
def test_v11_table_equals_the_mapped_class(engine: sa.Engine, prefix: str, length: str) -> None:
    migrated = checked_catalog(engine, prefix, length, THROTTLE_TABLES)
    assert [c[1:4] for c in migrated["columns"]] == [
        ("kind", "text", True), ("key", "text", True), ("began_at", "timestamp with time zone", True),
        ("job_id", "text", True)]
    assert {r[0] for r in migrated["relations"]} == {"{{prefix}}_throttles", "{{prefix}}_throttles_pkey"}
    defs = {c[1]: c[3] for c in migrated["constraints"]}
    assert defs["{{prefix}}_throttles_pkey"] == "PRIMARY KEY (kind, key)"
    assert not any(d.startswith("FOREIGN KEY") for d in defs.values())  # a start outlives its job


def test_down_to_v9_drops_only_the_throttles_table(engine: sa.Engine, prefix: str) -> None:
    tables = ("jobs", "journal", *TRACE_TABLES, "archive")
    alembic_venturi.upgrade(engine, prefix, "v9")
    before = snapshot(engine, prefix, tables)
    alembic_venturi.upgrade(engine, prefix, "v11")
    assert f"{prefix}_throttles" in relation_names(engine, prefix)
    alembic_venturi.downgrade(engine, prefix, "v9")
    assert alembic_venturi.current(engine, prefix) == "v9"
    assert f"{prefix}_throttles" not in relation_names(engine, prefix)
    assert snapshot(engine, prefix, tables) == before
    alembic_venturi.upgrade(engine, prefix, "v11")
    assert alembic_venturi.current(engine, prefix) == "v11"


def test_a_start_outlives_its_job(engine: sa.Engine, prefix: str) -> None:
    alembic_venturi.upgrade(engine, prefix, "v11")
    models = make_models(prefix)
    with engine.begin() as conn:
        conn.execute(sa.insert(models.jobs_table).values(id="j1", kind="k", payload={}))
        conn.execute(sa.insert(models.throttles_table).values(kind="k", key="a", began_at=sa.func.now(),
                                                              job_id="j1"))
        conn.execute(sa.delete(models.jobs_table))
        assert conn.execute(sa.select(sa.func.count()).select_from(models.throttles_table)).scalar_one() == 1


def test_check_current_needs_the_throttles_table(engine: sa.Engine, prefix: str) -> None:
    """A queue created by a project's own migrations without the v11 table is not at head."""
    models = make_models(prefix)
    for table in models.tables:
        if table is not models.throttles_table:
            table.create(engine)
    with pytest.raises(alembic_venturi.runner.SchemaNotMigrated, match=f"missing {prefix}_throttles"):
        alembic_venturi.check_current(engine, prefix)
    models.throttles_table.create(engine)
    alembic_venturi.check_current(engine, prefix)
