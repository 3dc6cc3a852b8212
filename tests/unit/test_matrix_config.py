"""The CI matrix (tox.ini, run by scripts/matrix.py) covers what the project claims to support."""

from __future__ import annotations

import configparser
import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
FAST_TIERS = {"tests/unit", "tests/integration", "tests/migrations"}


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
    every_tier = {f"tests/{p.name}" for p in (ROOT / "tests").iterdir() if p.is_dir() and p.name.startswith(
        ("unit", "integration", "migrations", "acceptance", "reliability"))}
    main = cells["main"]
    assert (main.python, main.deps, main.setenv["VENTURI_EXPECT_PG_MAJOR"]) == ("3.11", ["sqlalchemy>=2.1,<2.2"], "15")
    assert tiers(main) == every_tier
    lowest = cells["py310-lowest"]
    assert (lowest.python, lowest.deps) == ("3.10", [f"sqlalchemy=={sqlalchemy_floor()}"])
    assert (cells["py313"].python, cells["py313"].deps) == ("3.13", ["sqlalchemy>=2.1,<2.2"])
    pg18 = cells["pg18"]
    assert pg18.setenv == {"VENTURI_PG_SEARCH": "", "VENTURI_EXPECT_PG_MAJOR": "18"}
    for cell in cells.values():
        assert FAST_TIERS <= tiers(cell), cell.name
        assert cell.setenv.get("VENTURI_EXPECT_PG_MAJOR") in ("15", "18"), cell.name


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
