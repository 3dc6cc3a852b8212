"""The test folders have no ``__init__.py`` (pytest's prepend import mode): module names must be unique."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent


def test_every_test_module_name_is_unique_across_tiers() -> None:
    names = Counter(p.name for p in TESTS.rglob("*.py") if p.name != "conftest.py" and "__pycache__" not in p.parts)
    assert not [n for n, c in names.items() if c > 1], "two test folders hold modules of the same name"
