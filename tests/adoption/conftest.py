"""Fixtures of the adoption tests."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa

import alembic_venturi


@pytest.fixture(scope="session")
def sqlmodel_app(engine: sa.Engine) -> Iterator[Any]:
    """tests/adoption/adoption_sqlmodel.py on a migrated prefix of its own, with its heroes table.

    Imported once: SQLModel's registry keeps one ``Hero`` class per module.
    """
    pytest.importorskip("sqlmodel")
    prefix = f"sqm{os.getpid()}"
    alembic_venturi.upgrade(engine, prefix)
    os.environ["ADOPTION_PREFIX"] = prefix
    sys.modules.pop("adoption_sqlmodel", None)
    import adoption_sqlmodel

    del os.environ["ADOPTION_PREFIX"]
    adoption_sqlmodel.Hero.__table__.create(engine)
    yield adoption_sqlmodel
    adoption_sqlmodel.Hero.__table__.drop(engine)
