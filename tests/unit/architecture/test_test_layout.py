"""Where a test goes: tests/<cost tier>/<component>/test_*.py, its helpers in tests/support.

The tiers are named by cost: ``unit`` (no database, no process), ``integration``
(real PostgreSQL, in-process), ``acceptance`` (real processes: workers,
signals, faults, browser, PgBouncer, benchmark smoke) and ``migrations``
(Alembic and the catalogs).  A component folder is named after the part of
venturi it tests, never after a phase of the project.  The test folders have
no ``__init__.py`` (pytest's prepend import mode): module names must be unique.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

from support.paths import TESTS

TIERS = {"unit", "integration", "acceptance", "migrations"}
# A new component is added here on purpose (docs and CONTRIBUTING's Tests table name them).
KNOWN = {"architecture", "archive", "bench", "cli", "conformance", "contrib", "control", "docs", "enqueue", "ops",
         "periodic", "reliability", "storage", "testing", "web", "worker"}
PHASES = re.compile(r"hardening|adoption|wave|round|phase|sprint|milestone", re.IGNORECASE)


def modules_of_tests() -> list[Path]:
    return [p for p in TESTS.rglob("test_*.py") if "__pycache__" not in p.parts and "support" not in p.parts]


def test_the_top_level_holds_the_cost_tiers_and_support_only() -> None:
    entries = {p.name for p in TESTS.iterdir() if p.name != "__pycache__"}
    assert entries == TIERS | {"support", "conftest.py"}


def test_every_test_file_is_in_a_component_folder_of_a_tier() -> None:
    misplaced = []
    for path in modules_of_tests():
        parts = path.relative_to(TESTS).parts
        tier = parts[0]
        if tier == "migrations":
            ok = len(parts) in (2, 3)  # tests/migrations/test_x.py or tests/migrations/<topic>/test_x.py
        else:
            ok = tier in TIERS and len(parts) == 3 and parts[1] in KNOWN
        if not ok:
            misplaced.append("/".join(parts))
    assert not misplaced, f"not under tests/<tier>/<component>/: {misplaced}"


def test_no_folder_is_named_after_a_phase_of_the_project() -> None:
    phased = [str(p.relative_to(TESTS)) for p in TESTS.rglob("*") if p.is_dir() and PHASES.search(p.name)]
    assert not phased


def test_component_folders_hold_tests_only_and_helpers_live_in_support() -> None:
    helpers = [str(p.relative_to(TESTS)) for p in TESTS.rglob("*.py")
               if p.parts[len(TESTS.parts)] in TIERS and not (p.name.startswith("test_") or p.name == "conftest.py")]
    assert not helpers, f"move these to tests/support: {helpers}"


def test_no_test_module_edits_sys_path() -> None:
    edits = [str(p.relative_to(TESTS)) for p in TESTS.rglob("*.py")
             if re.search(r"sys\.path\s*(\.insert|\.append|\[:0\]|\s*=)", p.read_text(encoding="utf-8"))]
    assert not edits, "import from `support` (setup.cfg's pythonpath) instead"


def test_every_top_level_module_name_is_unique() -> None:
    """Test modules and the apps (tests/support/apps, on sys.path) are imported by their bare names."""
    top_level = [p for p in TESTS.rglob("*.py") if p.name != "conftest.py" and "__pycache__" not in p.parts
                 and ("support" not in p.parts or p.parent == TESTS / "support" / "apps")]
    names = Counter(p.name for p in top_level)
    assert not [n for n, c in names.items() if c > 1], "two modules imported by the same bare name"
