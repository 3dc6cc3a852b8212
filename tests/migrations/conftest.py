"""Fixtures for the migration tier: the seed catalog and scratch databases."""

from __future__ import annotations

import itertools
import os
from typing import Any

import pytest
import sqlalchemy as sa
from migration_catalog import apply_seed, run_sql, snapshot

_counter = itertools.count()


@pytest.fixture
def seed_catalog(engine: sa.Engine) -> dict[str, Any]:
    """The catalog of the seed DDL applied directly, under a prefix of its own."""
    prefix = f"seed{os.getpid()}_{next(_counter)}"
    apply_seed(engine, prefix)
    catalog = snapshot(engine, prefix)
    run_sql(engine, f"DROP TABLE {prefix}_journal; DROP TABLE {prefix}_jobs;")
    return catalog
