"""Fixtures for the migration tier: the seed catalog and scratch databases."""

from __future__ import annotations

import itertools
import os
from typing import Any

import pytest
import sqlalchemy as sa
from support.catalog import PERIODIC_TABLES, apply_periodic, apply_seed, run_sql, snapshot

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

