"""An SQLModel project's Alembic: autogenerate finds the queue in ``SQLModel.metadata``, then nothing.

The project targets ``SQLModel.metadata`` (as SQLModel's own docs do) and
calls ``make_models("shop", SQLModel)``; the real ``alembic`` command line
creates the seed schema, and a second autogenerate is empty.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from support.catalog import snapshot
from test_migrations_autogenerate import Project, operations

pytest.importorskip("sqlmodel")
pytestmark = pytest.mark.timeout(90)

SQLMODEL_MODELS = '''\
from sqlmodel import Field, SQLModel

from venturi_sa import make_models


class Hero(SQLModel, table=True):
    __tablename__ = "heroes"

    id: int | None = Field(default=None, primary_key=True)
    name: str


Base = SQLModel  # env.py targets models.Base.metadata, i.e. SQLModel.metadata
queue = make_models("shop", SQLModel)
'''


def test_sqlmodel_autogenerate_creates_the_seed_schema_then_finds_nothing(
        tmp_path: Path, fresh_db_url: str, seed_catalog: dict[str, Any]) -> None:
    project = Project(tmp_path, fresh_db_url, with_models=False, with_filter=False)
    (tmp_path / "models.py").write_text(SQLMODEL_MODELS)
    mako = tmp_path / "migrations" / "script.py.mako"  # SQLModel projects import sqlmodel in revisions
    mako.write_text(mako.read_text().replace("import sqlalchemy as sa\n", "import sqlalchemy as sa\nimport sqlmodel\n"))
    first = project.autogenerate("heroes and the shop queue")
    assert "op.create_table('heroes'" in first
    assert "op.create_table('shop_jobs'" in first and "op.create_table('shop_journal'" in first

    project.alembic("upgrade", "head")
    engine = sa.create_engine(fresh_db_url, poolclass=sa.pool.NullPool)
    try:
        assert snapshot(engine, "shop") == seed_catalog
    finally:
        engine.dispose()
    assert operations(project.autogenerate("nothing changed")) == []


def test_sqlmodel_autogenerate_drops_no_partition_and_no_forgotten_queue(tmp_path: Path, fresh_db_url: str) -> None:
    """venturi's Alembic plugin: attached partitions, then an env.py that no longer imports the queue."""
    from test_migrations_no_drops import attach_partitions

    project = Project(tmp_path, fresh_db_url, with_models=False, with_filter=False)
    (tmp_path / "models.py").write_text(SQLMODEL_MODELS)
    mako = tmp_path / "migrations" / "script.py.mako"
    mako.write_text(mako.read_text().replace("import sqlalchemy as sa\n", "import sqlalchemy as sa\nimport sqlmodel\n"))
    project.autogenerate("heroes and the shop queue")
    project.alembic("upgrade", "head")
    attach_partitions(fresh_db_url, "shop")
    assert operations(project.autogenerate("partitions attached")) == []
    project.alembic("upgrade", "head")
    (tmp_path / "models.py").write_text(SQLMODEL_MODELS.replace('queue = make_models("shop", SQLModel)\n', ""))
    assert operations(project.autogenerate("queue import forgotten")) == []
