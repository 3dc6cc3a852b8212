"""A project's own Alembic: autogenerate picks up make_models(), or leaves venturi alone.

Each test builds a small Alembic project in ``tmp_path`` and runs the real
``alembic`` command line against a scratch database of its own (autogenerate
compares whole databases).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import alembic
import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from support.catalog import PERIODIC_TABLES, snapshot

import alembic_venturi

pytestmark = pytest.mark.timeout(90)

ALEMBIC_INI = """\
[alembic]
script_location = %(here)s/migrations
prepend_sys_path = %(here)s
path_separator = os
"""

MODELS = '''\
import sqlalchemy as sa
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from venturi_sa import make_models


class Base(DeclarativeBase):
    metadata = sa.MetaData(naming_convention={
        "ix": "ix_%(column_0_label)s",
        "uq": "uq_%(table_name)s_%(column_0_name)s",
        "ck": "ck_%(table_name)s_%(constraint_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
    })


class Order(Base):
    __tablename__ = "orders"
    __table_args__ = (sa.CheckConstraint("total_cents >= 0", name="total_positive"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    customer: Mapped[str] = mapped_column(sa.Text, index=True)
    total_cents: Mapped[int]
'''

ENV = '''\
import os

import sqlalchemy as sa
from alembic import context

import models

{filter_setup}
engine = sa.create_engine(os.environ["APP_DATABASE_URL"], poolclass=sa.pool.NullPool)
with engine.connect() as connection:
    context.configure(
        connection=connection,
        target_metadata=models.Base.metadata,
        compare_type=True,
        compare_server_default=True,
        {filter_kwargs}
    )
    with context.begin_transaction():
        context.run_migrations()
'''

FILTER_SETUP = """\
from alembic_venturi import exclude_venturi

venturi = exclude_venturi("shop")
"""
FILTER_KWARGS = "include_name=venturi.include_name, include_object=venturi.include_object,"


class Project:
    """A throwaway Alembic project driven through the ``alembic`` command line."""

    def __init__(self, root: Path, url: str, with_models: bool, with_filter: bool) -> None:
        self.root, self.url = root, url
        (root / "migrations" / "versions").mkdir(parents=True)
        (root / "alembic.ini").write_text(ALEMBIC_INI)
        models = MODELS + ('\nqueue = make_models("shop", Base)\n' if with_models else "")
        (root / "models.py").write_text(models)
        (root / "migrations" / "env.py").write_text(ENV.format(
            filter_setup=FILTER_SETUP if with_filter else "",
            filter_kwargs=FILTER_KWARGS if with_filter else "",
        ))
        template = Path(alembic.__file__).parent / "templates" / "generic" / "script.py.mako"
        (root / "migrations" / "script.py.mako").write_text(template.read_text())

    def alembic(self, *args: str) -> str:
        result = subprocess.run(
            [sys.executable, "-W", "error", "-m", "alembic", "-c", str(self.root / "alembic.ini"),
             *args],
            cwd=self.root, capture_output=True, text=True, check=False,
            env={**os.environ, "APP_DATABASE_URL": self.url},
        )
        assert result.returncode == 0, result.stderr
        return result.stdout + result.stderr

    def autogenerate(self, message: str) -> str:
        """Run ``alembic revision --autogenerate`` and return the new revision's text."""
        before = set((self.root / "migrations" / "versions").glob("*.py"))
        self.alembic("revision", "--autogenerate", "-m", message)
        (created,) = set((self.root / "migrations" / "versions").glob("*.py")) - before
        return created.read_text()


def operations(revision_text: str) -> list[str]:
    """The ``op.`` calls in a rendered revision (upgrade and downgrade)."""
    return re.findall(r"^\s+(op\.\w+)\(", revision_text, flags=re.MULTILINE)


def test_autogenerate_creates_the_seed_schema_then_finds_nothing(
        tmp_path: Path, fresh_db_url: str, seed_catalog: dict[str, Any],
        periodic_catalog: dict[str, Any]) -> None:
    project = Project(tmp_path, fresh_db_url, with_models=True, with_filter=False)
    first = project.autogenerate("orders and the shop queue")

    assert "op.create_table('shop_jobs'" in first
    assert "op.create_table('shop_journal'" in first
    assert "op.create_table('shop_schedules'" in first and "op.create_table('shop_fires'" in first
    assert "postgresql_where=sa.text('NOT paused AND removed_at IS NULL')" in first
    assert "op.create_table('shop_pauses'" in first and "op.create_table('shop_cancels'" in first
    assert "op.create_table('shop_timeouts'" in first and "sa.Interval()" in first
    assert "postgresql_where=sa.text('resumed_at IS NULL')" in first
    assert "op.create_table('orders'" in first
    assert "sa.Identity(always=True" in first
    assert "postgresql_where=sa.text(\"status = 'pending'\")" in first
    assert "postgresql_where=sa.text(\"dedup_key IS NOT NULL AND status = 'pending'\")" in first
    assert "postgresql_where=sa.text('finished_at IS NOT NULL')" in first
    assert "server_default=sa.text(\"'null'::jsonb\")" in first
    assert "ondelete='CASCADE'" in first
    assert re.search(r"op\.f\('shop_jobs_claim'\)", first)
    assert "postgresql.JSONB" in first
    # The project's naming convention names the project's objects, never venturi's.
    assert "pk_orders" in first and "ck_orders_total_positive" in first and "ix_orders_customer" in first
    assert not re.search(r"\b(pk|ck|fk|ix|uq)_shop", first)
    assert "shop_journal_kind" not in first

    project.alembic("upgrade", "head")
    engine = sa.create_engine(fresh_db_url, poolclass=sa.pool.NullPool)
    try:
        assert snapshot(engine, "shop") == seed_catalog
        assert snapshot(engine, "shop", PERIODIC_TABLES) == periodic_catalog
        # No venturi version table: the project's Alembic owns these tables.
        assert alembic_venturi.current(engine, "shop") is None
        alembic_venturi.check_current(engine, "shop")
    finally:
        engine.dispose()

    second = project.autogenerate("nothing changed")
    assert operations(second) == []
    assert "pass" in second


@pytest.mark.parametrize("with_models", [False, True], ids=["without-models", "with-models"])
def test_env_filter_leaves_venturi_tables_to_venturi(
        tmp_path: Path, fresh_db_url: str, with_models: bool) -> None:
    alembic_venturi.upgrade(fresh_db_url, "shop")
    project = Project(tmp_path, fresh_db_url, with_models=with_models, with_filter=True)

    first = project.autogenerate("orders")
    assert "op.create_table('orders'" in first
    assert "shop" not in first  # no create, drop or alter of shop_* (nor shop_alembic_version)

    project.alembic("upgrade", "head")
    assert operations(project.autogenerate("nothing changed")) == []
    assert alembic_venturi.current(fresh_db_url, "shop") == alembic_venturi.HEAD


def test_without_the_filter_the_version_table_is_kept(
        tmp_path: Path, fresh_db_url: str) -> None:
    """venturi's migrations made the tables and make_models maps them: ``shop_alembic_version``, in no
    MetaData, is the one difference, and venturi's Alembic plugin keeps it (it was a ``drop_table``)."""
    alembic_venturi.upgrade(fresh_db_url, "shop")
    project = Project(tmp_path, fresh_db_url, with_models=True, with_filter=False)
    first = project.autogenerate("orders")
    assert "op.create_table('orders'" in first
    assert "shop" not in first  # the mapped classes match the migrated tables


def test_compare_metadata_reports_nothing_for_the_mapped_classes(
        engine: sa.Engine, prefix: str, models: Any) -> None:
    ours = {table.name for table in models.tables}

    def only_this_queue(name: str | None, type_: str, parent_names: Any) -> bool:
        return type_ != "table" or name in ours

    with engine.connect() as conn:
        context = MigrationContext.configure(conn, opts={
            "compare_type": True,
            "compare_server_default": True,
            "include_name": only_this_queue,
        })
        assert compare_metadata(context, models.metadata) == []


def test_filter_hooks_cover_tables_their_contents_and_the_version_table() -> None:
    venturi = alembic_venturi.exclude_venturi("shop", "billing")
    for table in ("shop_jobs", "shop_journal", "shop_schedules", "shop_fires", "shop_pauses", "shop_cancels",
                  "shop_timeouts", "shop_on_dead", "shop_traces", "shop_throttles", "shop_alembic_version",
                  "billing_jobs"):
        assert not venturi.include_name(table, "table", {"schema_name": None})
    assert not venturi.include_name("shop_jobs_claim", "index", {"table_name": "shop_jobs"})
    assert venturi.include_name("cron_jobs", "table", {"schema_name": None})
    assert venturi.include_name("ix_orders_customer", "index", {"table_name": "orders"})
    assert venturi.include_name(None, "schema", {})
    with pytest.raises(ValueError, match="at least one queue prefix"):
        alembic_venturi.exclude_venturi()
