"""Fixtures of the tests of ``venturi_sa.testing``: the plugin's fixtures on the suite's database."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa
from testing_kit import NOTES, make_queue

from venturi_sa import Models, Queue


@pytest.fixture(scope="session")
def notes_table(engine: sa.Engine) -> sa.Table:
    """The application table the test handlers write to (created once, committed)."""
    NOTES.metadata.create_all(engine)
    return NOTES


@pytest.fixture
def venturi_engine(engine: sa.Engine, notes_table: sa.Table) -> sa.Engine:
    """The plugin's engine fixture, overridden as an application would: the suite's own engine."""
    return engine


@pytest.fixture
def venturi_queue(models: Models) -> Queue:
    return make_queue(models)


@pytest.fixture
def no_rows_left(engine: sa.Engine, models: Models, notes_table: sa.Table) -> Iterator[None]:
    """Request it first: after the test (and its rolled-back session) no row may be left anywhere."""
    yield
    with engine.connect() as conn:
        left: dict[str, Any] = {t.name: conn.execute(sa.select(sa.func.count()).select_from(t)).scalar_one()
                                for t in (models.jobs_table, models.journal_table, notes_table)}
        schemas = conn.execute(sa.text("SELECT count(*) FROM pg_namespace WHERE nspname LIKE 'venturi\\_clock\\_%'"))
        left["clock schemas"] = schemas.scalar_one()
    assert all(n == 0 for n in left.values()), f"rows left behind: {left}"
