"""Prefixes: independent queues in one database, refused prefixes, the ways to connect."""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa
from support.catalog import relation_names, run_sql, snapshot

import alembic_venturi
from venturi_sa import make_models
from venturi_sa.errors import BadPrefix, SchemaNotMigrated
from venturi_sa.prefix import MAX_PREFIX_LENGTH

pytestmark = pytest.mark.timeout(60)

BAD_PREFIXES: list[Any] = [
    "Shop", "shop-q", "sh op", "x'y", 'x"y', "x; drop table y", "x;", "", "1shop", "shöp",
    "shop\n", "a" * (MAX_PREFIX_LENGTH + 1), 42, None, b"shop",
]


def test_two_prefixes_migrate_and_downgrade_independently(
        engine: sa.Engine, prefix: str, seed_catalog: dict[str, Any]) -> None:
    a, b = f"a{prefix}", f"b{prefix}"
    alembic_venturi.upgrade(engine, a)
    alembic_venturi.upgrade(engine, b, "v1")
    assert (alembic_venturi.current(engine, a), alembic_venturi.current(engine, b)) == (alembic_venturi.HEAD, "v1")

    alembic_venturi.upgrade(engine, b)
    alembic_venturi.downgrade(engine, a, "v1")
    assert (alembic_venturi.current(engine, a), alembic_venturi.current(engine, b)) == ("v1", alembic_venturi.HEAD)
    assert snapshot(engine, b) == seed_catalog

    alembic_venturi.downgrade(engine, a, "base")
    assert relation_names(engine, a) == set()
    assert alembic_venturi.current(engine, b) == alembic_venturi.HEAD
    assert f"{b}_alembic_version" in relation_names(engine, b)
    assert snapshot(engine, b) == seed_catalog


def _relation_count(engine: sa.Engine) -> int:
    with engine.connect() as conn:
        return int(conn.execute(sa.text("SELECT count(*) FROM pg_class")).scalar_one())


@pytest.mark.parametrize("bad", BAD_PREFIXES, ids=repr)
def test_bad_prefixes_are_refused_before_anything_is_built(engine: sa.Engine, bad: Any) -> None:
    before = _relation_count(engine)
    with pytest.raises(ValueError) as refused:
        alembic_venturi.upgrade(engine, bad)
    assert isinstance(refused.value, BadPrefix)
    # Validated before an engine is built: an unusable URL is never looked at.
    with pytest.raises(BadPrefix):
        alembic_venturi.upgrade("no-such-driver://nowhere", bad)
    for call in (
        lambda: alembic_venturi.downgrade(engine, bad, "base"),
        lambda: alembic_venturi.current(engine, bad),
        lambda: alembic_venturi.check_current(engine, bad),
        lambda: alembic_venturi.offline_sql(bad),
        lambda: alembic_venturi.exclude_venturi("ok", bad),
    ):
        with pytest.raises(BadPrefix):
            call()
    assert _relation_count(engine) == before


def test_connection_with_open_transaction_is_refused(engine: sa.Engine, prefix: str) -> None:
    with engine.connect() as conn:
        conn.execute(sa.text("SELECT 1"))
        with pytest.raises(alembic_venturi.OpenTransaction, match="open transaction"):
            alembic_venturi.upgrade(conn, prefix)
        conn.rollback()
        assert relation_names(engine, prefix) == set()

        alembic_venturi.upgrade(conn, prefix, "v2")
        assert not conn.in_transaction()
        assert alembic_venturi.current(conn, prefix) == "v2"
        assert not conn.in_transaction()
    # Committed: another connection sees it.
    assert alembic_venturi.current(engine, prefix) == "v2"


def test_current_leaves_an_open_transaction_open(engine: sa.Engine, prefix: str) -> None:
    alembic_venturi.upgrade(engine, prefix)
    with engine.connect() as conn, conn.begin():
        assert alembic_venturi.current(conn, prefix) == alembic_venturi.HEAD
        alembic_venturi.check_current(conn, prefix)
        assert conn.in_transaction()


def test_a_url_works_as_well_as_an_engine(pg_url: str, engine: sa.Engine, prefix: str,
                                          seed_catalog: dict[str, Any]) -> None:
    alembic_venturi.upgrade(pg_url, prefix)
    assert alembic_venturi.current(pg_url, prefix) == alembic_venturi.HEAD
    assert alembic_venturi.current(sa.make_url(pg_url), prefix) == alembic_venturi.HEAD
    assert snapshot(engine, prefix) == seed_catalog
    alembic_venturi.downgrade(pg_url, prefix, "base")
    assert alembic_venturi.current(engine, prefix) is None


def test_other_bind_types_are_refused(prefix: str) -> None:
    with pytest.raises(TypeError, match="Engine, a Connection or a database URL"):
        alembic_venturi.upgrade(object(), prefix)  # type: ignore[arg-type]


def test_check_current_names_the_state_and_the_fix(engine: sa.Engine, prefix: str) -> None:
    with pytest.raises(SchemaNotMigrated, match=f"queue '{prefix}' is not migrated") as err:
        alembic_venturi.check_current(engine, prefix)
    assert f"venturi migrate --prefix {prefix}" in str(err.value)

    alembic_venturi.upgrade(engine, prefix, "v1")
    needs = f"queue '{prefix}' is at v1, this venturi needs {alembic_venturi.HEAD}"
    with pytest.raises(SchemaNotMigrated, match=needs):
        alembic_venturi.check_current(engine, prefix)

    alembic_venturi.upgrade(engine, prefix)
    alembic_venturi.check_current(engine, prefix)

    run_sql(engine, f"UPDATE {prefix}_alembic_version SET version_num = 'v99'")
    with pytest.raises(SchemaNotMigrated, match="'v99', a revision this venturi does not know"):
        alembic_venturi.check_current(engine, prefix)


def test_check_current_accepts_tables_made_by_the_projects_own_alembic(
        engine: sa.Engine, prefix: str) -> None:
    make_models(prefix).metadata.create_all(engine)  # what autogenerate + upgrade produce
    assert alembic_venturi.current(engine, prefix) is None
    alembic_venturi.check_current(engine, prefix)

    run_sql(engine, f"DROP INDEX {prefix}_jobs_finished; "
                    f"CREATE INDEX {prefix}_journal_kind ON {prefix}_journal (kind, recorded_at)")
    with pytest.raises(SchemaNotMigrated,
                       match=f"missing {prefix}_jobs_finished, unexpected {prefix}_journal_kind"):
        alembic_venturi.check_current(engine, prefix)


def test_migration_bodies_run_as_written(engine: sa.Engine, prefix: str) -> None:
    """``%`` and ``:name`` in a body are neither format specs nor bind parameters."""
    from alembic_venturi.bodies import execute_raw

    with engine.connect() as conn, conn.begin():
        execute_raw(conn, f"-- 100% literal, :not_a_param\n"
                          f"CREATE TABLE {prefix}_raw (note text DEFAULT '50% :x');")
    with engine.connect() as conn:
        assert conn.execute(sa.text(f"SELECT pg_get_expr(adbin, adrelid) FROM pg_attrdef "
                                    f"WHERE adrelid = '{prefix}_raw'::regclass")).scalar_one() \
            == "'50% :x'::text"
    run_sql(engine, f"DROP TABLE {prefix}_raw")
