"""Fixtures of the dashboard tests: a migrated queue with a few jobs in each state, and its app."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))  # ops_support, docs blocks

pytest.importorskip("starlette")
from starlette.testclient import TestClient  # noqa: E402
from web_kit import seed  # noqa: E402

from venturi_sa.web import create_app  # noqa: E402


@pytest.fixture
def seeded(engine: sa.Engine, models: Any) -> dict[str, list[str]]:
    """Ids by state: pending, scheduled, claimed, expired, completed, dead (see :func:`web_kit.seed`)."""
    return seed(engine, models)


@pytest.fixture
def client(engine: sa.Engine, models: Any) -> Iterator[TestClient]:
    """A TestClient on the dashboard of this test's queue (actions enabled, no LISTEN)."""
    app = create_app(engine, models.prefix, listen=False, poll_interval=0.2)
    with TestClient(app) as test_client:
        yield test_client
    app.state.dashboard.feed.close()
