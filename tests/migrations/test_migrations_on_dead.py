"""Migration v7 (owed ``on_dead`` calls): its table equals the mapped class, it leaves the other tables
alone, a project's own migrations without it are not at head, and its rows go with their jobs."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from support.catalog import ON_DEAD_TABLES, TIMEOUT_TABLES, relation_names, snapshot
from test_migrations_control import checked_catalog

import alembic_venturi
from venturi_sa import make_models

pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize("length", ["short", "longest"])
def test_v7_table_equals_the_mapped_class(engine: sa.Engine, prefix: str, length: str) -> None:
    migrated = checked_catalog(engine, prefix, length, ON_DEAD_TABLES, identity_table="on_dead")
    assert [c[1] for c in migrated["columns"]] == [
        "id", "job_id", "kind", "run_no", "note", "actor", "created_at", "attempts", "not_before", "last_error"]
    assert {r[0] for r in migrated["relations"]} == {
        "{{prefix}}_on_dead", "{{prefix}}_on_dead_pkey", "{{prefix}}_on_dead_job", "{{prefix}}_on_dead_id_seq"}
    defs = {c[1]: c[3] for c in migrated["constraints"]}
    assert defs["{{prefix}}_on_dead_job_id_fkey"].endswith("ON DELETE CASCADE")


def test_down_to_v6_drops_only_the_on_dead_table(engine: sa.Engine, prefix: str) -> None:
    tables = ("jobs", "journal", *TIMEOUT_TABLES)
    alembic_venturi.upgrade(engine, prefix, "v6")
    before = snapshot(engine, prefix, tables)
    alembic_venturi.upgrade(engine, prefix)
    assert f"{prefix}_on_dead" in relation_names(engine, prefix)
    alembic_venturi.downgrade(engine, prefix, "v6")
    assert alembic_venturi.current(engine, prefix) == "v6"
    assert f"{prefix}_on_dead" not in relation_names(engine, prefix)
    assert snapshot(engine, prefix, tables) == before
    alembic_venturi.upgrade(engine, prefix)
    assert alembic_venturi.current(engine, prefix) == alembic_venturi.HEAD


def test_an_owed_call_goes_with_its_job(engine: sa.Engine, prefix: str) -> None:
    """``ON DELETE CASCADE``: cleaning up a job removes the ``on_dead`` call it was owed."""
    alembic_venturi.upgrade(engine, prefix)
    models = make_models(prefix)
    with engine.begin() as conn:
        conn.execute(sa.insert(models.jobs_table).values(id="j1", kind="k", payload={}))
        conn.execute(sa.insert(models.on_dead_table).values(job_id="j1", kind="k", run_no=1, actor="a"))
        assert conn.execute(sa.select(models.on_dead_table.c.attempts)).scalar_one() == 0
        conn.execute(sa.delete(models.jobs_table))
        assert conn.execute(sa.select(sa.func.count()).select_from(models.on_dead_table)).scalar_one() == 0


def test_check_current_needs_the_on_dead_table(engine: sa.Engine, prefix: str) -> None:
    """A queue created by a project's own migrations without the v7 table is not at head."""
    models = make_models(prefix)
    for table in models.tables:
        if table is not models.on_dead_table and table is not models.traces_table:
            table.create(engine)
    with pytest.raises(alembic_venturi.runner.SchemaNotMigrated, match=f"missing {prefix}_on_dead"):
        alembic_venturi.check_current(engine, prefix)
    models.on_dead_table.create(engine)
    models.traces_table.create(engine)  # v8's
    alembic_venturi.check_current(engine, prefix)
