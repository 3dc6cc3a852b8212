"""Fixtures for the migration tier: the seed catalog and scratch databases."""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa
from migration_catalog import PERIODIC_TABLES, apply_periodic, apply_seed, run_sql, snapshot

_counter = itertools.count()


@pytest.fixture
def seed_catalog(engine: sa.Engine) -> dict[str, Any]:
    """The catalog of the seed DDL applied directly, under a prefix of its own."""
    prefix = f"seed{os.getpid()}_{next(_counter)}"
    apply_seed(engine, prefix)
    catalog = snapshot(engine, prefix)
    run_sql(engine, f"DROP TABLE {prefix}_journal; DROP TABLE {prefix}_jobs;")
    return catalog


@pytest.fixture
def periodic_catalog(engine: sa.Engine) -> dict[str, Any]:
    """The catalog of the periodic-job tables (v4 body) applied directly on the seed."""
    prefix = f"seedp{os.getpid()}_{next(_counter)}"
    apply_seed(engine, prefix)
    apply_periodic(engine, prefix)
    catalog = snapshot(engine, prefix, PERIODIC_TABLES)
    run_sql(engine, f"DROP TABLE {prefix}_fires; DROP TABLE {prefix}_schedules; "
                    f"DROP TABLE {prefix}_journal; DROP TABLE {prefix}_jobs;")
    return catalog


@pytest.fixture
def fresh_db_url(pg_url: str, engine: sa.Engine) -> Iterator[str]:
    """URL of a new, empty database (dropped afterwards), for whole-database comparisons."""
    name = f"venturi_mig_{os.getpid()}_{next(_counter)}"
    admin = engine.execution_options(isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.exec_driver_sql(f"CREATE DATABASE {name}")
    except sa.exc.ProgrammingError as err:  # e.g. VENTURI_TEST_URL without CREATEDB
        pytest.skip(f"cannot create a scratch database: {err.orig}")
    yield sa.make_url(pg_url).set(database=name).render_as_string(hide_password=False)
    with admin.connect() as conn:
        conn.exec_driver_sql(f"DROP DATABASE {name} WITH (FORCE)")
