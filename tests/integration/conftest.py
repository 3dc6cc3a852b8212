"""Fixtures of the integration tier (real PostgreSQL, in-process): a session, the factories."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.orm import Session
from support.factories import factories_for


@pytest.fixture
def session(engine: sa.Engine) -> Iterator[Session]:
    """A Session on the test engine; whatever it did not commit is rolled back."""
    with Session(engine) as s:
        yield s


@pytest.fixture
def factories(models: Any, session: Session) -> tuple[Any, Any]:
    """``(JobFactory, JournalEntryFactory)`` bound to this test's models and session."""
    return factories_for(models, session)
