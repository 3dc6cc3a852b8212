"""A queue whose tables the project's own migrations created: ``venturi migrate`` leaves it alone,
``--stamp`` hands it to venturi's migrations, ``current`` says so when asked, and the "not migrated"
error names a forgotten ``make_models`` import in env.py among its causes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import sqlalchemy as sa
from click.testing import CliRunner, Result
from support.catalog import relation_names, run_sql
from test_migrations_autogenerate import Project

import alembic_venturi
from venturi_sa import Queue, Worker, make_models
from venturi_sa.cli.main import cli
from venturi_sa.errors import SchemaNotMigrated, VenturiError

pytestmark = pytest.mark.timeout(90)


def venturi(url: str, *args: str) -> Result:
    """``venturi ARGS --dsn URL`` in-process, with VENTURI_* unset."""
    return CliRunner().invoke(cli, [*args, "--dsn", url], prog_name="venturi",
                              env={"VENTURI_DSN": None, "VENTURI_PREFIX": None})


def app_managed(engine: sa.Engine, prefix: str) -> None:
    """The queue's tables as the project's autogenerate + upgrade create them: no version table."""
    make_models(prefix).metadata.create_all(engine)


def test_current_reports_app_managed_only_when_asked(engine: sa.Engine, prefix: str) -> None:
    assert alembic_venturi.current(engine, prefix, report_app_managed=True) is None  # nothing yet
    app_managed(engine, prefix)
    assert alembic_venturi.current(engine, prefix) is None  # unchanged for existing callers
    assert alembic_venturi.current(engine, prefix, report_app_managed=True) == alembic_venturi.APP_MANAGED
    with engine.connect() as conn:
        conn.begin()
        assert alembic_venturi.current(conn, prefix, report_app_managed=True) == "app-managed"
        assert conn.in_transaction()  # a caller's transaction is left open


def test_current_reports_venturis_revision_even_when_asked(engine: sa.Engine, prefix: str) -> None:
    alembic_venturi.upgrade(engine, prefix, "v2")
    assert alembic_venturi.current(engine, prefix, report_app_managed=True) == "v2"


def test_migrate_leaves_app_managed_tables_alone(engine: sa.Engine, pg_url: str, prefix: str) -> None:
    app_managed(engine, prefix)
    before = relation_names(engine, prefix)
    result = venturi(pg_url, "migrate", "--prefix", prefix)
    assert result.exit_code == 0, result.output
    assert "managed by your app's own migrations" in result.stdout
    assert f"venturi migrate --prefix {prefix} --stamp" in result.stdout
    assert relation_names(engine, prefix) == before  # no version table, nothing created
    result = venturi(pg_url, "migrate", "--prefix", prefix, "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {"prefix": prefix, "from": "app-managed", "to": "app-managed",
                                         "changed": False}


def test_stamp_hands_tables_at_head_to_venturi(engine: sa.Engine, pg_url: str, prefix: str) -> None:
    app_managed(engine, prefix)
    result = venturi(pg_url, "migrate", "--prefix", prefix, "--stamp", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {"prefix": prefix, "from": "app-managed", "to": alembic_venturi.HEAD,
                                         "changed": True}
    assert alembic_venturi.current(engine, prefix) == alembic_venturi.HEAD
    alembic_venturi.check_current(engine, prefix)
    result = venturi(pg_url, "migrate", "--prefix", prefix)
    assert result.exit_code == 0 and "already at" in result.stdout, result.output
    alembic_venturi.downgrade(engine, prefix, "base")  # venturi's migrations now own the tables
    assert relation_names(engine, prefix) == set()


def test_stamp_refuses_tables_not_at_head(engine: sa.Engine, pg_url: str, prefix: str) -> None:
    app_managed(engine, prefix)
    run_sql(engine, f"DROP TABLE {prefix}_on_dead")
    result = venturi(pg_url, "migrate", "--prefix", prefix, "--stamp")
    assert result.exit_code == 1, result.output
    assert result.stderr.startswith("venturi: error: ") and len(result.stderr.strip().splitlines()) == 1
    assert f"missing {prefix}_on_dead" in result.stderr
    assert f"{prefix}_alembic_version" not in relation_names(engine, prefix)  # rolled back
    assert alembic_venturi.current(engine, prefix, report_app_managed=True) == alembic_venturi.APP_MANAGED


def test_stamp_refuses_queues_that_are_not_app_managed(engine: sa.Engine, pg_url: str, prefix: str) -> None:
    result = venturi(pg_url, "migrate", "--prefix", prefix, "--stamp")
    assert result.exit_code == 1 and "not created yet" in result.stderr, result.output
    assert relation_names(engine, prefix) == set()
    with pytest.raises(VenturiError, match="has no tables to stamp"):
        alembic_venturi.stamp(engine, prefix)

    alembic_venturi.upgrade(engine, prefix, "v6")
    result = venturi(pg_url, "migrate", "--prefix", prefix, "--stamp")
    assert result.exit_code == 1 and "already tracked by venturi (at v6)" in result.stderr, result.output
    with pytest.raises(VenturiError, match="already tracked"):
        alembic_venturi.stamp(engine, prefix)
    assert alembic_venturi.current(engine, prefix) == "v6"


def test_migrate_after_the_projects_own_autogenerate(tmp_path: Path, fresh_db_url: str) -> None:
    """Issue 25's report: a Flask-Migrate-style project created ``shop_*``; migrate used to exit 1."""
    project = Project(tmp_path, fresh_db_url, with_models=True, with_filter=False)
    project.autogenerate("orders and the shop queue")
    project.alembic("upgrade", "head")
    result = venturi(fresh_db_url, "migrate", "--prefix", "shop")
    assert result.exit_code == 0, result.output
    assert "managed by your app's own migrations" in result.stdout
    assert alembic_venturi.current(fresh_db_url, "shop", report_app_managed=True) == alembic_venturi.APP_MANAGED


# -- item 5: the "tables missing" error names a forgotten make_models import ---------------------------

def test_missing_tables_error_names_the_env_py_import(engine: sa.Engine, prefix: str) -> None:
    with pytest.raises(SchemaNotMigrated) as err:
        alembic_venturi.check_current(engine, prefix)
    message = str(err.value)
    assert f"queue '{prefix}' is not migrated (no {prefix}_jobs table)" in message
    assert "never run" in message
    assert f"env.py must import the module that calls make_models('{prefix}', ...)" in message
    assert "another database or prefix" in message
    assert f"venturi migrate --prefix {prefix}" in message


def test_the_worker_says_so_at_start(engine: sa.Engine, prefix: str) -> None:
    worker = Worker(Queue(make_models(prefix)), engine, concurrency=1)
    with pytest.raises(SchemaNotMigrated, match=r"env\.py must import the module that calls make_models"):
        worker.run_until_idle()


def test_app_tables_behind_head_error_names_the_env_py_import(engine: sa.Engine, prefix: str) -> None:
    app_managed(engine, prefix)
    run_sql(engine, f"DROP TABLE {prefix}_on_dead")
    with pytest.raises(SchemaNotMigrated, match=f"missing {prefix}_on_dead") as err:
        alembic_venturi.check_current(engine, prefix)
    assert "env.py must import the module that calls make_models" in str(err.value)
