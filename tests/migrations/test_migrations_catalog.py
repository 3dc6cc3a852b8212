"""A migrated queue equals the seed DDL applied directly, catalog entry by catalog entry."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
import sqlalchemy as sa
from alembic.script import ScriptDirectory
from support.catalog import (
    NOT_NULL_CONSTRAINTS_SINCE,
    PERIODIC_TABLES,
    TOKEN,
    expected_constraint_kinds,
    relation_names,
    run_sql,
    server_major,
    snapshot,
)

import alembic_venturi
from alembic_venturi.runner import HEAD_INDEXES, HEAD_TABLE_INDEXES, SCRIPT_LOCATION
from venturi_sa import make_models
from venturi_sa.prefix import LONGEST_SUFFIX, MAX_PREFIX_LENGTH, PG_IDENTIFIER_MAX

pytestmark = pytest.mark.timeout(60)


def longest_prefix(prefix: str) -> str:
    return ("l" + prefix + "x" * MAX_PREFIX_LENGTH)[:MAX_PREFIX_LENGTH]


def test_seed_catalog_is_the_full_seed_schema(engine: sa.Engine, seed_catalog: dict[str, Any]) -> None:
    assert len(seed_catalog["columns"]) == 14 + 8
    kinds = Counter((c[0], c[2]) for c in seed_catalog["constraints"])
    assert kinds == expected_constraint_kinds(server_major(engine))
    assert len(seed_catalog["indexes"]) == 9 + 2  # the seed's indexes and two primary keys
    assert {r[0] for r in seed_catalog["relations"]} >= {f"{TOKEN}_journal_id_seq"}


def test_not_null_constraints_are_named_after_their_columns(
        engine: sa.Engine, seed_catalog: dict[str, Any]) -> None:
    """From PostgreSQL 18 on, one ``<table>_<column>_not_null`` constraint per NOT NULL column."""
    names = {c[1] for c in seed_catalog["constraints"] if c[2] == "n"}
    if server_major(engine) < NOT_NULL_CONSTRAINTS_SINCE:
        assert names == set()
        return
    not_null = {f"{table}_{column}_not_null" for table, column, _, notnull, *_ in seed_catalog["columns"]
                if notnull}
    assert names == not_null
    assert max(len(n) for n in names) - len(TOKEN) == len(LONGEST_SUFFIX)


@pytest.mark.parametrize("length", ["short", "longest"])
def test_head_equals_seed(engine: sa.Engine, prefix: str, length: str,
                          seed_catalog: dict[str, Any]) -> None:
    if length == "longest":
        prefix = longest_prefix(prefix)
        assert len(prefix) == MAX_PREFIX_LENGTH
    alembic_venturi.upgrade(engine, prefix)
    assert snapshot(engine, prefix) == seed_catalog
    assert alembic_venturi.current(engine, prefix) == alembic_venturi.HEAD
    # No name was truncated at 63 bytes, the version table's included.
    assert f"{prefix}_alembic_version_pkc" in relation_names(engine, prefix)
    constraints = {c[1] for c in _constraints(engine, prefix)}
    assert f"{prefix}_journal_outcome_check" in constraints
    if server_major(engine) >= NOT_NULL_CONSTRAINTS_SINCE:
        assert f"{prefix}{LONGEST_SUFFIX}" in constraints
        if length == "longest":
            assert len(f"{prefix}{LONGEST_SUFFIX}") == PG_IDENTIFIER_MAX


def _constraints(engine: sa.Engine, prefix: str) -> list[Any]:
    with engine.connect() as conn:
        return list(conn.execute(sa.text(
            "SELECT conrelid::regclass::text, conname FROM pg_constraint "
            "WHERE conrelid = ANY(ARRAY[:a, :b]::regclass[])"),
            {"a": f"{prefix}_jobs", "b": f"{prefix}_journal"}))


@pytest.mark.parametrize("length", ["short", "longest"])
def test_models_create_all_equals_seed(engine: sa.Engine, prefix: str, length: str,
                                       seed_catalog: dict[str, Any]) -> None:
    if length == "longest":
        prefix = longest_prefix(prefix)
    make_models(prefix).metadata.create_all(engine)
    assert snapshot(engine, prefix) == seed_catalog


def test_offline_sql_applied_to_an_empty_database_equals_head(
        engine: sa.Engine, prefix: str, seed_catalog: dict[str, Any]) -> None:
    script = alembic_venturi.offline_sql(prefix)
    assert "{{" not in script
    assert script.lstrip().startswith("BEGIN;") and script.rstrip().endswith("COMMIT;")
    run_sql(engine, script, autocommit=True)
    assert snapshot(engine, prefix) == seed_catalog
    assert alembic_venturi.current(engine, prefix) == alembic_venturi.HEAD
    alembic_venturi.upgrade(engine, prefix)  # online continues from the offline run
    assert snapshot(engine, prefix) == seed_catalog


def test_offline_sql_range_continues_an_online_migration(
        engine: sa.Engine, prefix: str, seed_catalog: dict[str, Any]) -> None:
    alembic_venturi.upgrade(engine, prefix, "v1")
    script = alembic_venturi.offline_sql(prefix, "v1:head")
    assert f"CREATE TABLE {prefix}_jobs" not in script and f"CREATE TABLE {prefix}_journal" not in script
    run_sql(engine, script, autocommit=True)
    assert alembic_venturi.current(engine, prefix) == alembic_venturi.HEAD
    assert snapshot(engine, prefix) == seed_catalog


def test_head_constant_matches_the_script_directory() -> None:
    scripts = ScriptDirectory(SCRIPT_LOCATION)
    assert scripts.get_current_head() == alembic_venturi.HEAD
    chain = [s.revision for s in scripts.walk_revisions("base", "heads")]
    assert tuple(reversed(chain)) == alembic_venturi.REVISIONS


def test_head_index_list_matches_the_seed(seed_catalog: dict[str, Any]) -> None:
    """``check_current`` recognises a head schema without a version table by these names."""
    seed_indexes = {i[1] for i in seed_catalog["indexes"] if not i[4]}  # not primary keys
    assert seed_indexes == {f"{TOKEN}_{suffix}" for suffix in HEAD_INDEXES}


def index_names(engine: sa.Engine, prefix: str) -> set[str]:
    return {n for n in relation_names(engine, prefix) if n.startswith(prefix)}


def test_step_by_step_equals_head(engine: sa.Engine, prefix: str,
                                  seed_catalog: dict[str, Any]) -> None:
    alembic_venturi.upgrade(engine, prefix, "v1")
    assert alembic_venturi.current(engine, prefix) == "v1"
    names = index_names(engine, prefix)
    assert f"{prefix}_journal_kind" in names
    assert f"{prefix}_jobs_created" not in names and f"{prefix}_jobs_finished" not in names

    alembic_venturi.upgrade(engine, prefix, "v2")
    assert alembic_venturi.current(engine, prefix) == "v2"
    assert f"{prefix}_jobs_created" in index_names(engine, prefix)

    alembic_venturi.upgrade(engine, prefix, "v3")
    assert alembic_venturi.current(engine, prefix) == "v3"
    names = index_names(engine, prefix)
    assert f"{prefix}_journal_kind" not in names and f"{prefix}_jobs_finished" in names
    assert snapshot(engine, prefix) == seed_catalog


def test_v1_has_the_narrower_indexes(engine: sa.Engine, prefix: str) -> None:
    alembic_venturi.upgrade(engine, prefix, "v1")
    indexes = {i[1]: i[2] for i in snapshot(engine, prefix)["indexes"]}
    t = TOKEN
    assert indexes[f"{t}_jobs_claim"].endswith(
        "(kind, priority, created_at) WHERE (status = 'pending'::text)")
    assert indexes[f"{t}_jobs_claim_priority"].endswith(
        "(priority, created_at) WHERE (status = 'pending'::text)")
    assert indexes[f"{t}_jobs_dedup"].endswith(
        "(kind, dedup_key) WHERE ((dedup_key IS NOT NULL) AND (status = 'pending'::text))")
    assert indexes[f"{t}_journal_job"].endswith("(job_id)")
    assert indexes[f"{t}_journal_kind"].endswith("(kind, recorded_at)")


def test_downgrade_step_by_step_then_base_then_up_again(
        engine: sa.Engine, prefix: str, seed_catalog: dict[str, Any]) -> None:
    reference = {}
    for revision in ("v1", "v2"):
        other = f"{revision}{prefix}"  # not "<prefix>_...": that would look like ours
        alembic_venturi.upgrade(engine, other, revision)
        reference[revision] = snapshot(engine, other)

    alembic_venturi.upgrade(engine, prefix)
    alembic_venturi.downgrade(engine, prefix, "v2")
    assert alembic_venturi.current(engine, prefix) == "v2"
    assert snapshot(engine, prefix) == reference["v2"]
    alembic_venturi.downgrade(engine, prefix, "v1")
    assert snapshot(engine, prefix) == reference["v1"]

    alembic_venturi.downgrade(engine, prefix, "base")
    assert relation_names(engine, prefix) == set()  # tables, indexes and version table gone
    assert alembic_venturi.current(engine, prefix) is None

    alembic_venturi.upgrade(engine, prefix)
    assert snapshot(engine, prefix) == seed_catalog


def test_downgrade_base_keeps_rows_of_other_tables(engine: sa.Engine, prefix: str) -> None:
    run_sql(engine, f"CREATE TABLE {prefix}_app (id int); INSERT INTO {prefix}_app VALUES (1);")
    alembic_venturi.upgrade(engine, prefix)
    alembic_venturi.downgrade(engine, prefix, "base")
    assert relation_names(engine, prefix) == {f"{prefix}_app"}
    run_sql(engine, f"DROP TABLE {prefix}_app")


def test_a_failing_upgrade_leaves_nothing_behind(engine: sa.Engine, prefix: str) -> None:
    # A table already named like the journal makes V1 fail halfway.
    run_sql(engine, f"CREATE TABLE {prefix}_journal (id int)")
    with pytest.raises(sa.exc.ProgrammingError, match="already exists"):
        alembic_venturi.upgrade(engine, prefix)
    assert relation_names(engine, prefix) == {f"{prefix}_journal"}
    run_sql(engine, f"DROP TABLE {prefix}_journal")
    alembic_venturi.upgrade(engine, prefix)
    assert alembic_venturi.current(engine, prefix) == alembic_venturi.HEAD


# -- v4: the periodic-job tables, beside the unchanged seed tables ---------------------------

@pytest.mark.parametrize("length", ["short", "longest"])
def test_head_periodic_tables_equal_their_body_and_the_models(
        engine: sa.Engine, prefix: str, length: str, periodic_catalog: dict[str, Any]) -> None:
    if length == "longest":
        prefix = longest_prefix(prefix)
    alembic_venturi.upgrade(engine, prefix)
    assert snapshot(engine, prefix, PERIODIC_TABLES) == periodic_catalog
    other = f"m{prefix}"[:MAX_PREFIX_LENGTH]
    make_models(other).metadata.create_all(engine)
    assert snapshot(engine, other, PERIODIC_TABLES) == periodic_catalog
    names = {i[1] for i in periodic_catalog["indexes"] if not i[4]}
    assert names == {f"{TOKEN}_{suffix}" for suffix in HEAD_TABLE_INDEXES if suffix.startswith(PERIODIC_TABLES)}
    assert {r[0] for r in periodic_catalog["relations"] if r[1] == "r"} == {
        f"{TOKEN}_{t}" for t in PERIODIC_TABLES}


def test_v4_adds_only_new_tables_and_its_down_migration_removes_them(
        engine: sa.Engine, prefix: str, seed_catalog: dict[str, Any]) -> None:
    alembic_venturi.upgrade(engine, prefix, "v3")
    before = relation_names(engine, prefix)
    alembic_venturi.upgrade(engine, prefix, "v4")
    assert snapshot(engine, prefix) == seed_catalog  # the seed tables, byte for byte
    added = relation_names(engine, prefix) - before
    assert {n for n in added if not n.startswith((f"{prefix}_schedules", f"{prefix}_fires"))} == set()
    assert f"{prefix}_schedules" in added and f"{prefix}_fires" in added
    alembic_venturi.downgrade(engine, prefix, "v3")
    assert relation_names(engine, prefix) == before
    assert snapshot(engine, prefix) == seed_catalog
    alembic_venturi.upgrade(engine, prefix)
    assert alembic_venturi.current(engine, prefix) == alembic_venturi.HEAD
