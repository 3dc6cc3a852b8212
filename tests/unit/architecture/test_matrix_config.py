"""The CI matrix (tox.ini, run by scripts/matrix.py) covers what the project claims to support."""

from __future__ import annotations

import configparser
import importlib.util
import re
import sys
from types import ModuleType

import pytest
from support.paths import REPO

ROOT = REPO
FAST_TIERS = {"tests/unit", "tests/integration", "tests/migrations"}
# The acceptance folders whose subject is the versions: the CLI (quickstart, the embedded-server fallback), PgBouncer.
VERSION_CELL_TESTS = FAST_TIERS | {"tests/acceptance/cli", "tests/acceptance/storage"}


@pytest.fixture(scope="module")
def matrix() -> ModuleType:
    spec = importlib.util.spec_from_file_location("venturi_matrix", ROOT / "scripts" / "matrix.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def setup_cfg() -> configparser.ConfigParser:
    cfg = configparser.ConfigParser(interpolation=None)
    cfg.read(ROOT / "setup.cfg", encoding="utf-8")
    return cfg


def sqlalchemy_floor() -> str:
    requires = setup_cfg()["options"]["install_requires"]
    match = re.search(r"^\s*sqlalchemy>=([\d.]+),<", requires, flags=re.MULTILINE | re.IGNORECASE)
    assert match, requires
    return match.group(1)


def tiers(cell) -> set[str]:  # type: ignore[no-untyped-def]
    return {arg for args in cell.runs for arg in args if arg.startswith("tests/")}


def test_every_tox_test_environment_is_a_matrix_cell(matrix: ModuleType) -> None:
    tox = configparser.ConfigParser(interpolation=None)
    tox.read(ROOT / "tox.ini", encoding="utf-8")
    envlist = {e.strip() for e in tox["tox"]["envlist"].split(",")} - {"lint", "type"}
    assert {c.name for c in matrix.read_cells()} == envlist


def test_the_cells_cover_the_supported_combinations(matrix: ModuleType) -> None:
    cells = {c.name: c for c in matrix.read_cells()}
    main = cells["main"]
    assert (main.python, main.deps, main.setenv["VENTURI_EXPECT_PG_MAJOR"]) == ("3.11", ["sqlalchemy>=2.1,<2.2"], "15")
    lowest = cells["py310-lowest"]
    assert (lowest.python, lowest.deps) == ("3.10", [f"sqlalchemy=={sqlalchemy_floor()}"])
    newest = cells["py313-pg18"]
    assert (newest.python, newest.deps) == ("3.13", ["sqlalchemy>=2.1,<2.2"])
    assert newest.setenv == {"VENTURI_PG_SEARCH": "", "VENTURI_EXPECT_PG_MAJOR": "18", "VENTURI_DRIVER_MATRIX": "lean"}
    assert main.setenv["VENTURI_DRIVER_MATRIX"] == "full"  # every driver combination runs somewhere
    for cell in cells.values():
        assert FAST_TIERS <= tiers(cell), cell.name
        if cell is not main:
            assert tiers(cell) == VERSION_CELL_TESTS, cell.name
        assert cell.setenv.get("VENTURI_EXPECT_PG_MAJOR") in ("15", "18"), cell.name
        assert cell.setenv.get("VENTURI_DRIVER_MATRIX") == ("full" if cell is main else "lean"), cell.name


def test_the_main_cell_runs_every_test_folder_the_fast_tiers_first(matrix: ModuleType) -> None:
    main = next(c for c in matrix.read_cells() if c.name == "main")
    runs = [[arg for arg in args if arg.startswith("tests/")] for args in main.runs]
    assert runs[0] == ["tests/unit"] and sorted(runs[1]) == ["tests/integration", "tests/migrations"]
    assert "-n" in main.runs[1]
    assert all(arg.startswith("tests/acceptance/") for run in runs[2:] for arg in run)  # the slow tier last
    run = {arg for args in runs for arg in args}
    folders = {p.parent.relative_to(ROOT).as_posix() for p in (ROOT / "tests").rglob("test_*.py")
               if "support" not in p.parts}
    missed = sorted(f for f in folders if not any(f == r or f.startswith(r + "/") for r in run))
    assert not missed, f"no CI run reaches {missed}"


def test_the_classifiers_name_exactly_the_tested_pythons(matrix: ModuleType) -> None:
    classifiers = setup_cfg()["metadata"]["classifiers"]
    claimed = set(re.findall(r"Python :: (3\.\d+)", classifiers))
    assert claimed == {c.python for c in matrix.read_cells()}
    assert setup_cfg()["options"]["python_requires"] == f">={min(claimed, key=lambda v: int(v[2:]))}"


@pytest.mark.parametrize(("line", "counts"), [
    ("289 passed in 112.22s (0:01:52)", {"passed": 289}),
    ("==== 3 failed, 40 passed, 2 skipped, 1 error in 9.10s ====", {"failed": 3, "passed": 40, "skipped": 2,
                                                                     "errors": 1}),
    ("no tests ran in 0.01s", None),
])
def test_pytest_summary_lines_are_read(matrix: ModuleType, line: str, counts: dict[str, int] | None) -> None:
    assert matrix.pytest_counts(["collected", line]) == counts


def test_a_cell_without_its_interpreter_is_skipped_loudly(matrix: ModuleType, monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    cell = next(c for c in matrix.read_cells() if c.name == "py313-pg18")
    monkeypatch.setattr(matrix, "find_python", lambda minor: (None, "no pyenv"))
    result = matrix.run_cell(cell)
    assert (result.status, result.detail) == ("SKIPPED", "no Python 3.13 on this machine (no pyenv)")
    assert "!!! matrix: SKIPPING cell py313-pg18" in capsys.readouterr().out


@pytest.mark.parametrize(("code", "lines", "detail"), [
    (5, ["no tests ran in 0.01s"], "pytest exited 5 (no pytest summary line)"),
    (0, ["3 skipped in 0.20s"], "pytest ran no test"),
    (1, ["1 failed, 2 passed in 0.30s"], "pytest exited 1"),
])
def test_a_run_that_fails_or_tests_nothing_fails_the_cell(
        matrix: ModuleType, monkeypatch: pytest.MonkeyPatch, code: int, lines: list[str], detail: str) -> None:
    cell = next(c for c in matrix.read_cells() if c.name == "py313-pg18")
    monkeypatch.setattr(matrix, "find_python", lambda minor: (sys.executable, ""))
    monkeypatch.setattr(matrix, "run_streamed", lambda argv, env: (code, lines))
    result = matrix.run_cell(cell)
    assert (result.status, result.detail) == ("FAILED", detail)


def test_the_last_line_is_the_totals_and_a_failed_cell_fails_the_run(
        matrix: ModuleType, capsys: pytest.CaptureFixture[str]) -> None:
    cells = matrix.read_cells()
    results = [matrix.Result(cells[0], "ok", counts={"passed": 10, "skipped": 1}),
               matrix.Result(cells[1], "FAILED", "pytest exited 1", counts={"passed": 4, "failed": 2}),
               matrix.Result(cells[2], "SKIPPED", "no Python 3.12")]
    assert matrix.report(results, 75.0) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[-1] == "matrix: 14 passed, 2 failed, 1 skipped"
    assert out[-2].startswith("total 1m15.0s; cells failed: py310-lowest; cells skipped: py312-sqla20")
