"""Migration v8 (trace context): its table equals the mapped class, every derived name fits the prefix
limit, it leaves the other tables alone, a project's own migrations without it are not at head, and its
rows go with their jobs."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from support.catalog import ON_DEAD_TABLES, TRACE_TABLES, relation_names, snapshot
from test_migrations_control import checked_catalog

import alembic_venturi
from venturi_sa import make_models

pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize("length", ["short", "longest"])
def test_v8_table_equals_the_mapped_class(engine: sa.Engine, prefix: str, length: str) -> None:
    migrated = checked_catalog(engine, prefix, length, TRACE_TABLES)
    assert [c[1:4] for c in migrated["columns"]] == [("job_id", "text", True), ("carrier", "jsonb", True)]
    assert {r[0] for r in migrated["relations"]} == {"{{prefix}}_traces", "{{prefix}}_traces_pkey"}
    defs = {c[1]: c[3] for c in migrated["constraints"]}
    assert defs["{{prefix}}_traces_pkey"] == "PRIMARY KEY (job_id)"
    assert defs["{{prefix}}_traces_job_id_fkey"].endswith("ON DELETE CASCADE")


def test_down_to_v7_drops_only_the_traces_table(engine: sa.Engine, prefix: str) -> None:
    tables = ("jobs", "journal", *ON_DEAD_TABLES)
    alembic_venturi.upgrade(engine, prefix, "v7")
    before = snapshot(engine, prefix, tables)
    alembic_venturi.upgrade(engine, prefix, "v8")
    assert alembic_venturi.current(engine, prefix) == "v8"
    assert f"{prefix}_traces" in relation_names(engine, prefix)
    alembic_venturi.downgrade(engine, prefix, "v7")
    assert alembic_venturi.current(engine, prefix) == "v7"
    assert f"{prefix}_traces" not in relation_names(engine, prefix)
    assert snapshot(engine, prefix, tables) == before
    alembic_venturi.upgrade(engine, prefix, "v8")
    assert alembic_venturi.current(engine, prefix) == "v8"


def test_a_trace_context_goes_with_its_job(engine: sa.Engine, prefix: str) -> None:
    """``ON DELETE CASCADE``: cleaning up a job removes its trace context."""
    alembic_venturi.upgrade(engine, prefix, "v8")
    models = make_models(prefix)
    carrier = {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
    with engine.begin() as conn:
        conn.execute(sa.insert(models.jobs_table).values(id="j1", kind="k", payload={}))
        conn.execute(sa.insert(models.traces_table).values(job_id="j1", carrier=carrier))
        assert conn.execute(sa.select(models.traces_table.c.carrier)).scalar_one() == carrier
        conn.execute(sa.delete(models.jobs_table))
        assert conn.execute(sa.select(sa.func.count()).select_from(models.traces_table)).scalar_one() == 0


def test_check_current_needs_the_traces_table(engine: sa.Engine, prefix: str) -> None:
    """A queue created by a project's own migrations without the v8 table is not at head."""
    models = make_models(prefix)
    for table in models.tables:
        if table is not models.traces_table:
            table.create(engine)
    with pytest.raises(alembic_venturi.runner.SchemaNotMigrated, match=f"missing {prefix}_traces"):
        alembic_venturi.check_current(engine, prefix)
    models.traces_table.create(engine)
    alembic_venturi.check_current(engine, prefix)
