"""The operations (and the dashboard) reach storage only through the Backend seam (``backend_for``).

``venturi_sa/ops`` may import the storage modules' params, result and action
*data* (names starting with a capital letter), ``backend_for`` and the error
classification of ``storage.faults``; calling a
storage function directly, or building SQL, would bypass the seam.
"""

from __future__ import annotations

import ast
from pathlib import Path

import venturi_sa.ops

OPS = Path(venturi_sa.ops.__file__).parent
WEB = OPS.parent / "web"  # the dashboard reads the same way (its SQL is storage/dashboard.py)
SQL_BUILDERS = {"text", "select", "update", "delete", "insert", "func", "literal", "tuple_"}
DIRECT = {"archive", "archive_dashboard"}  # storage modules the operations call without the Backend


def _imports(path: Path) -> list[tuple[str, str]]:
    tree = ast.parse(path.read_text())
    found: list[tuple[str, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            found += [(node.module, alias.name) for alias in node.names]
        elif isinstance(node, ast.Import):
            found += [(alias.name, "") for alias in node.names]
    return found


def test_ops_modules_use_the_storage_seam_only() -> None:
    modules = sorted(OPS.glob("*.py"))
    assert {p.name for p in modules} >= {"records.py", "history.py", "stats.py", "cleanup.py", "admin.py"}
    assert {p.name for p in WEB.glob("*.py")} >= {"app.py", "queries.py", "routes.py"}
    for path in modules + sorted(WEB.glob("*.py")):
        for module, name in _imports(path):
            if module == "venturi_sa.storage.backend":
                assert name == "backend_for", (path.name, name)
            elif module == "venturi_sa.storage.faults":
                pass  # error classification (SQLSTATEs), no SQL
            elif module == "venturi_sa.storage" and name in DIRECT:
                pass  # called directly, as the storage modules will be once the Backend has the worker's verbs only
            elif module.startswith("venturi_sa.storage"):
                assert module != "venturi_sa.storage" and name[:1].isupper(), (path.name, module, name)
            assert not (module == "sqlalchemy" and name in SQL_BUILDERS), (path.name, name)


def test_ops_modules_build_no_sql() -> None:
    for path in sorted(OPS.glob("*.py")) + sorted(WEB.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "sa":
                assert node.attr not in SQL_BUILDERS, (path.name, node.lineno, node.attr)
