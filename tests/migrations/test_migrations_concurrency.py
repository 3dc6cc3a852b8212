"""Concurrent upgrades of one prefix from separate processes."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest
import sqlalchemy as sa
from support.catalog import snapshot

import alembic_venturi

# Each child connects, reports "ready", waits for "go" on stdin, then upgrades:
# the parent releases all of them at once, so their migrations overlap.
CHILD = """
import sys
import sqlalchemy as sa
import alembic_venturi

engine = sa.create_engine(sys.argv[1], poolclass=sa.pool.NullPool)
with engine.connect() as conn:
    print("ready", flush=True)
    sys.stdin.readline()
    alembic_venturi.upgrade(conn, sys.argv[2])
print(alembic_venturi.current(engine, sys.argv[2]), flush=True)
"""
PROCESSES = 4


@pytest.mark.timeout(60)
def test_concurrent_upgrades_of_one_prefix_all_succeed(
        pg_url: str, engine: sa.Engine, prefix: str, seed_catalog: dict[str, Any]) -> None:
    children = [
        subprocess.Popen([sys.executable, "-c", CHILD, pg_url, prefix], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(PROCESSES)
    ]
    try:
        for child in children:
            assert child.stdout is not None
            assert child.stdout.readline().strip() == "ready", child.stderr
        for child in children:
            assert child.stdin is not None
            child.stdin.write("go\n")
            child.stdin.flush()
        results = [child.communicate(timeout=45) for child in children]
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
                child.wait()
    for child, (out, err) in zip(children, results, strict=True):
        assert child.returncode == 0, err
        assert out.strip() == alembic_venturi.HEAD
    with engine.connect() as conn:
        versions = conn.execute(sa.text(f"SELECT version_num FROM {prefix}_alembic_version")).all()
    assert versions == [(alembic_venturi.HEAD,)]
    assert snapshot(engine, prefix) == seed_catalog


def test_the_lock_key_is_a_stable_signed_64_bit_digest() -> None:
    key = alembic_venturi.lock_key("shop")
    assert -(2**63) <= key < 2**63
    assert key == alembic_venturi.lock_key("shop") != alembic_venturi.lock_key("shop2")
    out = subprocess.run(
        [sys.executable, "-c", "import alembic_venturi; print(alembic_venturi.lock_key('shop'))"],
        capture_output=True, text=True, check=True,
    ).stdout
    assert int(out) == key
