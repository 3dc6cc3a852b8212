"""The ``venturi`` pytest plugin: fixtures for testing an application that uses venturi.

Registered through the ``pytest11`` entry point, so installing venturi
makes the fixtures available (``-p no:venturi`` turns them off).  Nothing
here runs unless a test asks for a fixture.

* ``venturi_engine`` (session scope): an Engine on the test database,
  from ``--venturi-database-url``, ``$VENTURI_DATABASE_URL`` or the
  ``venturi_database_url`` ini option, in that order.  Override it with
  your own fixture of that name to use your application's engine.
* ``venturi_connection``: a Connection on ``venturi_engine`` whose outer
  transaction is rolled back after the test.
* ``venturi_queue_session``: a Session on ``venturi_connection`` of the
  queue's ``session_class`` (``sqlmodel.Session`` for SQLModel models)
  joining that transaction (commits in the code under test release
  savepoints), see :func:`~venturi_sa.testing.rolled_back_session`.
  Override it to return the session your application uses (Flask-SQLAlchemy's
  ``db.session`` bound to ``venturi_connection``): the fixtures below then act
  on it.
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
from venturi_sa.testing.sessions import AnySession

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
def venturi_connection(venturi_engine: sa.Engine) -> Iterator[sa.Connection]:
    """A Connection whose outer transaction is rolled back after the test."""
    with venturi_engine.connect() as connection:
        outer = connection.begin()
        try:
            yield connection
        finally:
            outer.rollback()


def _session_class(request: pytest.FixtureRequest) -> type[Session]:
    """The queue's ``session_class`` if the test suite defines ``venturi_queue``, else ``Session``."""
    try:
        queue = request.getfixturevalue("venturi_queue")
    except pytest.fail.Exception:  # the plugin's own venturi_queue: not defined by the suite
        return Session
    return queue.session_class if isinstance(queue, Queue) else Session


@pytest.fixture
def venturi_queue_session(request: pytest.FixtureRequest, venturi_connection: sa.Connection) -> Iterator[Session]:
    """A Session of the queue's ``session_class`` whose test is rolled back at the end, whatever it committed."""
    session = _session_class(request)(bind=venturi_connection, join_transaction_mode="create_savepoint")
    try:
        yield session
    finally:
        session.close()


@pytest.fixture
def venturi_queue() -> Queue:
    """Your application's queue: override this fixture to return it."""
    pytest.fail("venturi: define a `venturi_queue` fixture returning your Queue (or pass queue=...)",
                pytrace=False)


class Drainer:
    """``venturi_drain(**options)``: :func:`~venturi_sa.testing.drain` with the test's session and queue."""

    def __init__(self, request: pytest.FixtureRequest, session: AnySession) -> None:
        self._request = request
        self.session = session

    def __call__(self, queue: Queue | None = None, *, session: AnySession | None = None,
                 **options: Any) -> DrainResult:
        if queue is None:
            queue = self._request.getfixturevalue("venturi_queue")
        return drain(session if session is not None else self.session, queue, **options)


@pytest.fixture
def venturi_drain(request: pytest.FixtureRequest, venturi_queue_session: AnySession) -> Drainer:
    """``venturi_drain(**options)``: drain the queue in ``venturi_queue_session`` (yours, if you override it)."""
    return Drainer(request, venturi_queue_session)


@pytest.fixture
def venturi_clock(venturi_queue_session: AnySession) -> Clock:
    """The test clock of ``venturi_queue_session``'s transaction (yours, if you override it)."""
    return Clock(venturi_queue_session)


@pytest.fixture
def venturi_inline(venturi_queue: Queue) -> Iterator[InlineRunner]:
    with inline(venturi_queue) as runner:
        yield runner
