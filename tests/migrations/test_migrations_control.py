"""Migrations v5 and v6 (runtime control; v6: per-job time limits): their tables equal the mapped classes,
they leave the other tables alone, and their rows go with their jobs."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from support.catalog import (
    CONTROL_TABLES,
    NOT_NULL_CONSTRAINTS_SINCE,
    TIMEOUT_TABLES,
    migrated_and_mapped,
    relation_names,
    server_major,
    snapshot,
)
from test_migrations_catalog import longest_prefix

import alembic_venturi
from venturi_sa import make_models
from venturi_sa.prefix import LONGEST_SUFFIX

pytestmark = pytest.mark.timeout(60)


def checked_catalog(engine: sa.Engine, prefix: str, length: str, tables: tuple[str, ...],
                    identity_table: str = "journal") -> dict[str, Any]:
    """The migrated catalog of ``tables``, checked equal to the mapped classes' and within the prefix limit."""
    if length == "longest":
        prefix = longest_prefix(prefix)
    migrated, mapped = migrated_and_mapped(engine, prefix, tables, identity_table=identity_table)
    assert migrated == mapped
    if server_major(engine) >= NOT_NULL_CONSTRAINTS_SINCE:  # every derived name fits the prefix limit
        names = {c[1] for c in migrated["constraints"] if c[2] == "n"}
        assert max(len(n) for n in names) - len("{{prefix}}") < len(LONGEST_SUFFIX)
    return migrated


@pytest.mark.parametrize("length", ["short", "longest"])
def test_v5_tables_equal_the_mapped_classes(engine: sa.Engine, prefix: str, length: str) -> None:
    migrated = checked_catalog(engine, prefix, length, CONTROL_TABLES, identity_table="pauses")
    assert len(migrated["columns"]) == 8 + 5
    assert {r[0] for r in migrated["relations"]} == {
        "{{prefix}}_pauses", "{{prefix}}_pauses_pkey", "{{prefix}}_pauses_open", "{{prefix}}_pauses_id_seq",
        "{{prefix}}_cancels", "{{prefix}}_cancels_pkey"}
    indexes = {i[1]: i[2] for i in migrated["indexes"]}
    assert indexes["{{prefix}}_pauses_open"].endswith("(kind) WHERE (resumed_at IS NULL)")


@pytest.mark.parametrize("length", ["short", "longest"])
def test_v6_table_equals_the_mapped_class(engine: sa.Engine, prefix: str, length: str) -> None:
    migrated = checked_catalog(engine, prefix, length, TIMEOUT_TABLES)
    assert [c[1:4] for c in migrated["columns"]] == [("job_id", "text", True), ("timeout", "interval", True)]
    assert {r[0] for r in migrated["relations"]} == {"{{prefix}}_timeouts", "{{prefix}}_timeouts_pkey"}
    defs = {c[1]: c[3] for c in migrated["constraints"]}
    assert defs["{{prefix}}_timeouts_timeout_check"] == "CHECK ((timeout > '00:00:00'::interval))"
    assert defs["{{prefix}}_timeouts_job_id_fkey"].endswith("ON DELETE CASCADE")


def test_down_to_v4_drops_only_the_control_tables(engine: sa.Engine, prefix: str,
                                                  seed_catalog: dict[str, Any]) -> None:
    alembic_venturi.upgrade(engine, prefix)
    alembic_venturi.downgrade(engine, prefix, "v4")
    assert alembic_venturi.current(engine, prefix) == "v4"
    names = relation_names(engine, prefix)
    assert not {f"{prefix}_pauses", f"{prefix}_cancels"} & names
    assert snapshot(engine, prefix) == seed_catalog
    alembic_venturi.upgrade(engine, prefix)
    assert {f"{prefix}_pauses", f"{prefix}_cancels"} <= relation_names(engine, prefix)


def test_a_cancel_request_goes_with_its_job(engine: sa.Engine, prefix: str) -> None:
    """``ON DELETE CASCADE``: cleaning up a job removes its cancel request."""
    alembic_venturi.upgrade(engine, prefix)
    models = make_models(prefix)
    with engine.begin() as conn:
        conn.execute(sa.insert(models.jobs_table).values(id="j1", kind="k", payload={}))
        conn.execute(sa.insert(models.cancels_table).values(job_id="j1", run_no=1, actor="a"))
        conn.execute(sa.delete(models.jobs_table))
        assert conn.execute(sa.select(sa.func.count()).select_from(models.cancels_table)).scalar_one() == 0


def test_check_current_needs_the_control_tables(engine: sa.Engine, prefix: str) -> None:
    """A queue created by a project's own migrations without the v5 tables is not at head."""
    models = make_models(prefix)
    for table in models.tables[:4]:  # the seed tables and v4's
        table.create(engine)
    with pytest.raises(alembic_venturi.runner.SchemaNotMigrated, match=f"missing {prefix}_pauses"):
        alembic_venturi.check_current(engine, prefix)
    models.pauses_table.create(engine)
    models.cancels_table.create(engine)
    models.timeouts_table.create(engine)  # v6's
    models.on_dead_table.create(engine)  # v7's
    models.traces_table.create(engine)  # v8's
    models.archive_table.create(engine)  # v9's
    for table in models.Limits.tables:  # v10's
        table.create(engine)
    models.throttles_table.create(engine)  # v11's
    models.workflow.waits_table.create(engine)  # v12's
    models.workflow.parents_table.create(engine)
    models.steps_table.create(engine)  # v13's
    models.signals_table.create(engine)
    alembic_venturi.check_current(engine, prefix)
    with engine.begin() as conn:  # a project's autogenerate run before v14: the archive without its two columns
        conn.execute(sa.text(f"ALTER TABLE {prefix}_archive DROP COLUMN steps, DROP COLUMN limit_key"))
    with pytest.raises(alembic_venturi.runner.SchemaNotMigrated,
                       match=f"missing {prefix}_archive.steps, missing {prefix}_archive.limit_key"):
        alembic_venturi.check_current(engine, prefix)


def test_down_to_v5_drops_only_the_timeouts_table(engine: sa.Engine, prefix: str) -> None:
    alembic_venturi.upgrade(engine, prefix, "v5")
    before = snapshot(engine, prefix, ("jobs", "journal", *CONTROL_TABLES))
    alembic_venturi.upgrade(engine, prefix)
    assert f"{prefix}_timeouts" in relation_names(engine, prefix)
    alembic_venturi.downgrade(engine, prefix, "v5")
    assert alembic_venturi.current(engine, prefix) == "v5"
    assert f"{prefix}_timeouts" not in relation_names(engine, prefix)
    assert snapshot(engine, prefix, ("jobs", "journal", *CONTROL_TABLES)) == before
    alembic_venturi.upgrade(engine, prefix)
    assert alembic_venturi.current(engine, prefix) == alembic_venturi.HEAD


def test_a_time_limit_goes_with_its_job_and_must_be_positive(engine: sa.Engine, prefix: str) -> None:
    """``ON DELETE CASCADE``: cleaning up a job removes its time limit; the CHECK refuses a zero one."""
    alembic_venturi.upgrade(engine, prefix)
    models = make_models(prefix)
    with engine.begin() as conn:
        conn.execute(sa.insert(models.jobs_table).values(id="j1", kind="k", payload={}))
        conn.execute(sa.insert(models.timeouts_table).values(job_id="j1", timeout=timedelta(seconds=3)))
        conn.execute(sa.delete(models.jobs_table))
        assert conn.execute(sa.select(sa.func.count()).select_from(models.timeouts_table)).scalar_one() == 0
    with pytest.raises(sa.exc.IntegrityError, match="timeouts_timeout_check"), engine.begin() as conn:
        conn.execute(sa.insert(models.jobs_table).values(id="j2", kind="k", payload={}))
        conn.execute(sa.insert(models.timeouts_table).values(job_id="j2", timeout=timedelta(0)))


def test_check_current_needs_the_timeouts_table(engine: sa.Engine, prefix: str) -> None:
    """A queue created by a project's own migrations without the v6 table is not at head."""
    models = make_models(prefix)
    for table in models.tables:
        if table is not models.timeouts_table:
            table.create(engine)
    with pytest.raises(alembic_venturi.runner.SchemaNotMigrated, match=f"missing {prefix}_timeouts"):
        alembic_venturi.check_current(engine, prefix)
    models.timeouts_table.create(engine)
    alembic_venturi.check_current(engine, prefix)
