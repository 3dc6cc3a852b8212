"""The python examples of docs/operations.md and docs/migrations.md run for real.

These pages predate the opt-in marker of ``test_docs_examples.py`` and assume
other names: operations blocks share one namespace holding ``engine`` and a
``queue`` on a migrated prefix; migration blocks are self-contained and read
``DATABASE_URL`` (a database of their own here, since they use fixed prefixes).
"""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from support.docblocks import run
from support.paths import DOCS

import alembic_venturi
import venturi_sa as v


def test_operations_examples_run(engine: sa.Engine, prefix: str) -> None:
    alembic_venturi.upgrade(engine, prefix)
    queue = v.Queue(v.make_models(prefix))
    assert run(DOCS / "operations.md", {"engine": engine, "queue": queue}) >= 5


def test_migrations_examples_run(fresh_db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DATABASE_URL", fresh_db_url)
    assert run(DOCS / "migrations.md", {}, fresh_each=True) >= 5
    assert alembic_venturi.current(fresh_db_url, "shop") == alembic_venturi.HEAD
