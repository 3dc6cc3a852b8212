"""Shared fixtures: one throwaway PostgreSQL cluster per test session.

Set ``VENTURI_TEST_URL`` to run against an existing server instead.  Every
test that needs tables gets its own queue prefix, so tests never see each
other's rows.  Under pytest-xdist every worker is a session of its own, with
its own cluster.

``VENTURI_EXPECT_PG_MAJOR`` (set by the CI matrix) makes the session stop at
once if the server is another major version than the cell is meant to test.

The helpers are the ``support`` package (``tests/support``) and the apps tests
run as processes are in ``tests/support/apps``: setup.cfg's ``pythonpath`` puts
both on this process's ``sys.path``, and this module on the ``PYTHONPATH`` of
every process a test starts.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator

import pytest
import sqlalchemy as sa
from support.paths import APPS, TESTS

from venturi_sa.devtools.throwaway import NoPostgres, ThrowawayCluster, find_server

# A worker app run as a script or by `venturi worker module:attr` imports `support` and its sibling apps.
os.environ["PYTHONPATH"] = os.pathsep.join([str(TESTS), str(APPS), *filter(None, [os.environ.get("PYTHONPATH")])])

# Durability is irrelevant for tests; these make commits cheap on 2 cores.
FAST_SETTINGS = {"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off"}
_counter = itertools.count()


def pytest_report_header() -> str:
    """Which PostgreSQL the database tests use, on the first lines of every run."""
    if os.environ.get("VENTURI_TEST_URL"):
        return "postgresql: $VENTURI_TEST_URL"
    try:
        return f"postgresql: throwaway cluster, {find_server().describe()}"
    except NoPostgres as err:
        return f"postgresql: none ({err})"


def pytest_sessionstart(session: pytest.Session) -> None:
    """With ``VENTURI_EXPECT_PG_MAJOR``, stop before any test if the throwaway server would differ."""
    expected = os.environ.get("VENTURI_EXPECT_PG_MAJOR")
    if not expected or os.environ.get("VENTURI_TEST_URL"):
        return
    try:
        server = find_server()
    except NoPostgres as err:
        pytest.exit(f"VENTURI_EXPECT_PG_MAJOR={expected}, but {err}", returncode=3)
    if str(server.major) != expected:
        pytest.exit(f"VENTURI_EXPECT_PG_MAJOR={expected}, but the tests would run {server.describe()}",
                    returncode=3)


def _check_server_version(url: str) -> None:
    expected = os.environ.get("VENTURI_EXPECT_PG_MAJOR")
    if not expected:
        return
    eng = sa.create_engine(url, poolclass=sa.pool.NullPool)
    try:
        with eng.connect() as conn:
            version = str(conn.exec_driver_sql("SHOW server_version").scalar_one())
    finally:
        eng.dispose()
    if version.split(".")[0] != expected:
        pytest.exit(f"VENTURI_EXPECT_PG_MAJOR={expected}, but the test server is PostgreSQL {version}",
                    returncode=3)


@pytest.fixture(scope="session")
def pg_url() -> Iterator[str]:
    """SQLAlchemy URL of a PostgreSQL database the tests may freely write to."""
    url = os.environ.get("VENTURI_TEST_URL")
    if url:
        _check_server_version(url)
        yield url
        return
    with ThrowawayCluster(FAST_SETTINGS) as cluster:
        _check_server_version(cluster.url)
        yield cluster.url


def make_engine(url: str, **kwargs: object) -> sa.Engine:
    """An engine with the settings every test uses (UTC session time zone)."""
    return sa.create_engine(
        url, connect_args={"options": "-c timezone=UTC"}, pool_size=20, max_overflow=40, **kwargs
    )


@pytest.fixture(scope="session")
def engine(pg_url: str) -> Iterator[sa.Engine]:
    eng = make_engine(pg_url)
    yield eng
    eng.dispose()


@pytest.fixture(scope="session")
def venturi_engine(engine: sa.Engine) -> sa.Engine:
    """The ``venturi`` pytest plugin's engine (``venturi_sa.testing``): the suite's own."""
    return engine


@pytest.fixture
def prefix() -> str:
    """A queue prefix no other test in this session uses."""
    return f"t{os.getpid()}_{next(_counter)}"


@pytest.fixture
def models(engine: sa.Engine, prefix: str):  # type: ignore[no-untyped-def]
    """Mapped classes for this test's prefix, with the tables migrated to head."""
    import alembic_venturi
    from venturi_sa import make_models

    alembic_venturi.upgrade(engine, prefix)
    return make_models(prefix)


@pytest.fixture
def fresh_db_url(pg_url: str, engine: sa.Engine) -> Iterator[str]:
    """URL of a new, empty database of this test's own (dropped afterwards, connections and all)."""
    name = f"scratch_{os.getpid()}_{next(_counter)}"
    admin = engine.execution_options(isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.exec_driver_sql(f"CREATE DATABASE {name}")
    except sa.exc.ProgrammingError as err:  # e.g. VENTURI_TEST_URL without CREATEDB
        pytest.skip(f"cannot create a scratch database: {err.orig}")
    yield sa.make_url(pg_url).set(database=name).render_as_string(hide_password=False)
    with admin.connect() as conn:
        conn.exec_driver_sql(f"DROP DATABASE {name} WITH (FORCE)")
