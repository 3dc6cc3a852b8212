"""The storage conformance suite: every Backend verb, against a real PostgreSQL.

The ``backend`` fixture is parametrized by implementation; today there is one
(``sqlalchemy``).  The drivers issue adds one parameter per driver, and every
test here then runs on each.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from venturi_sa.storage.backend import Backend, SqlAlchemyBackend

IMPLEMENTATIONS: dict[str, Callable[[Any], Backend]] = {"sqlalchemy": SqlAlchemyBackend}


@pytest.fixture(params=sorted(IMPLEMENTATIONS))
def backend(request: pytest.FixtureRequest, models: Any) -> Backend:
    """A Backend for this test's freshly migrated queue."""
    return IMPLEMENTATIONS[request.param](models)
