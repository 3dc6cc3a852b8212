"""The ``venturi`` pytest plugin: fixtures for testing an application that uses venturi.

Registered through the ``pytest11`` entry point, so installing venturi
makes the fixtures available (``-p no:venturi`` turns them off).  Nothing
here runs unless a test asks for a fixture.

* ``venturi_engine`` (session scope): an Engine on the test database,
  from ``--venturi-database-url``, ``$VENTURI_DATABASE_URL`` or the
  ``venturi_database_url`` ini option, in that order.  Override it with
  your own fixture of that name to use your application's engine.
* ``venturi_queue_session``: a Session whose whole test runs in one outer
  transaction that is rolled back afterwards (commits in the code under
  test release savepoints), see :func:`~venturi_sa.testing.rolled_back_session`.
* ``venturi_queue``: define it (return your :class:`~venturi_sa.Queue`) to
  let the fixtures below find it.
* ``venturi_drain``: ``venturi_drain(**options)`` drains ``venturi_queue``
  in ``venturi_queue_session`` (``queue=``/``session=`` override them).
* ``venturi_clock``: the test clock of ``venturi_queue_session``.
* ``venturi_inline``: inline mode on ``venturi_queue`` for the test.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.orm import Session

from venturi_sa.queue import Queue
from venturi_sa.testing.clock import Clock
from venturi_sa.testing.drain import DrainResult, drain
from venturi_sa.testing.inline import InlineRunner, inline
from venturi_sa.testing.sessions import AnySession, rolled_back_session

URL_OPTION = "venturi_database_url"
URL_ENV = "VENTURI_DATABASE_URL"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("venturi")
    group.addoption("--venturi-database-url", dest=URL_OPTION, default=None,
                    help=f"SQLAlchemy URL of the test database for the venturi fixtures (or ${URL_ENV})")
    parser.addini(URL_OPTION, "SQLAlchemy URL of the test database for the venturi fixtures", default=None)


@pytest.fixture(scope="session")
def venturi_database_url(pytestconfig: pytest.Config) -> str:
    """The test database URL: command line, then environment, then ini."""
    url = pytestconfig.getoption(URL_OPTION) or os.environ.get(URL_ENV) or pytestconfig.getini(URL_OPTION)
    if not url:
        pytest.fail(f"venturi: no test database; pass --venturi-database-url, set ${URL_ENV} or the "
                    f"{URL_OPTION} ini option, or override the venturi_engine fixture", pytrace=False)
    return str(url)


@pytest.fixture(scope="session")
def venturi_engine(venturi_database_url: str) -> Iterator[sa.Engine]:
    """An Engine on the test database (override with your application's engine)."""
    engine = sa.create_engine(venturi_database_url)
    yield engine
    engine.dispose()


@pytest.fixture
def venturi_queue_session(venturi_engine: sa.Engine) -> Iterator[Session]:
    """A Session whose test is rolled back at the end, whatever it committed."""
    with rolled_back_session(venturi_engine) as session:
        yield session


@pytest.fixture
def venturi_queue() -> Queue:
    """Your application's queue: override this fixture to return it."""
    pytest.fail("venturi: define a `venturi_queue` fixture returning your Queue (or pass queue=...)",
                pytrace=False)


class Drainer:
    """``venturi_drain(**options)``: :func:`~venturi_sa.testing.drain` with the test's session and queue."""

    def __init__(self, request: pytest.FixtureRequest, session: Session) -> None:
        self._request = request
        self.session = session

    def __call__(self, queue: Queue | None = None, *, session: AnySession | None = None,
                 **options: Any) -> DrainResult:
        if queue is None:
            queue = self._request.getfixturevalue("venturi_queue")
        return drain(session if session is not None else self.session, queue, **options)


@pytest.fixture
def venturi_drain(request: pytest.FixtureRequest, venturi_queue_session: Session) -> Drainer:
    return Drainer(request, venturi_queue_session)


@pytest.fixture
def venturi_clock(venturi_queue_session: Session) -> Clock:
    return Clock(venturi_queue_session)


@pytest.fixture
def venturi_inline(venturi_queue: Queue) -> Iterator[InlineRunner]:
    with inline(venturi_queue) as runner:
        yield runner
