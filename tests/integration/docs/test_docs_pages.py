"""The python examples of docs/operations.md and docs/migrations.md run for real.

These pages predate the opt-in marker of ``test_docs_examples.py`` and assume
other names: operations blocks share one namespace holding ``engine`` and a
``queue`` on a migrated prefix; migration blocks are self-contained and read
``DATABASE_URL`` (a database of their own here, since they use fixed prefixes).
"""

from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest
import sqlalchemy as sa
from test_docs_examples import DOCS, blocks

import alembic_venturi
import venturi_sa as v


def run(page: Path, namespace: dict[str, object], fresh_each: bool = False) -> int:
    """Run the page's blocks as a module (or one module per block); returns how many ran."""
    module = None
    ran = 0
    for line, code in blocks(page):
        if module is None or fresh_each:
            module = types.ModuleType(f"docs_{page.stem}_{ran}")
            module.__dict__.update(namespace)
            sys.modules[module.__name__] = module  # annotations (Mapped[int]) resolve through it
        try:
            exec(compile("\n" * (line - 1) + code, str(page), "exec"), module.__dict__)  # noqa: S102
        finally:
            if fresh_each:
                sys.modules.pop(module.__name__, None)
        ran += 1
    if module is not None:
        sys.modules.pop(module.__name__, None)
    return ran


def test_operations_examples_run(engine: sa.Engine, prefix: str) -> None:
    alembic_venturi.upgrade(engine, prefix)
    queue = v.Queue(v.make_models(prefix))
    assert run(DOCS / "operations.md", {"engine": engine, "queue": queue}) >= 5


def test_migrations_examples_run(fresh_db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DATABASE_URL", fresh_db_url)
    assert run(DOCS / "migrations.md", {}, fresh_each=True) >= 5
    assert alembic_venturi.current(fresh_db_url, "shop") == alembic_venturi.HEAD
