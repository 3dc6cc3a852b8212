"""Every SQL statement venturi runs is built and executed in ``venturi_sa/storage/``.

Every other module of every package under ``venturi_sa`` calls a storage
function (or, for the worker's verbs, the :class:`~venturi_sa.storage.backend.Backend`);
it never builds a statement (``sa.select/insert/update/delete/text/func/...``,
imported or through the ``sa`` alias) nor executes one (``.execute``,
``.exec_driver_sql``, ``.scalar(s)``, ``.query``).  The allowlist below is
short and says why.
"""

from __future__ import annotations

import ast
from pathlib import Path

import venturi_sa

PACKAGE = Path(venturi_sa.__file__).parent
STORAGE = PACKAGE / "storage"
SQL_BUILDERS = {
    "select", "insert", "update", "delete", "text", "func", "literal", "literal_column", "bindparam", "case",
    "and_", "or_", "not_", "exists", "union", "union_all", "tuple_", "table", "column", "cast", "null", "true",
    "false", "any_", "all_", "values", "lateral", "outerjoin", "join",
}
SQL_MODULES = ("sqlalchemy", "sqlalchemy.sql", "sqlalchemy.sql.expression", "sqlalchemy.dialects.postgresql")
EXECUTORS = {"execute", "exec_driver_sql", "scalar", "scalars", "query"}
ALLOWED = {
    # The mapped classes: column defaults (now()) and partial-index predicates are DDL, not queries.
    "models/job_tables.py": {"text", "func"},
    "models/feature_tables.py": {"text", "func"},
    "models/limit_tables.py": {"func"},
    "models/workflow_tables.py": {"text"},
}


def _modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if STORAGE not in p.parents and "__pycache__" not in p.parts)


def _sql_uses(path: Path) -> list[tuple[int, str]]:
    """``(line, what)`` of every statement built or executed in ``path``."""
    aliases = {"sa", "sqlalchemy"}
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            aliases |= {a.asname or a.name for a in node.names if a.name == "sqlalchemy"}
        elif isinstance(node, ast.ImportFrom) and node.module in SQL_MODULES:
            found += [(node.lineno, a.name) for a in node.names if a.name in SQL_BUILDERS]
        elif isinstance(node, ast.Attribute):
            if isinstance(node.value, ast.Name) and node.value.id in aliases and node.attr in SQL_BUILDERS:
                found.append((node.lineno, f"sa.{node.attr}"))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in EXECUTORS:
            found.append((node.lineno, f".{node.func.attr}()"))
    return found


def test_no_module_outside_storage_builds_or_runs_sql() -> None:
    modules = _modules()
    assert {p.parent.name for p in modules} >= {"ops", "web", "worker", "periodic", "cli", "testing", "contrib"}
    offenders = []
    for path in modules:
        allowed = ALLOWED.get(str(path.relative_to(PACKAGE)), set())
        offenders += [f"{path.relative_to(PACKAGE)}:{line} {what}" for line, what in _sql_uses(path)
                      if what.removeprefix("sa.") not in allowed]
    assert not offenders, "SQL outside venturi_sa/storage/:\n" + "\n".join(offenders)


def test_the_check_sees_what_it_forbids(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text("import sqlalchemy as sa\nfrom sqlalchemy import select\n"
                      "def f(conn):\n    conn.execute(sa.text('SELECT 1'))\n    conn.exec_driver_sql('x')\n")
    assert {what for _, what in _sql_uses(sample)} == {"select", "sa.text", ".execute()", ".exec_driver_sql()"}


def test_the_allowlist_is_needed() -> None:
    for name, allowed in ALLOWED.items():
        used = {what.removeprefix("sa.") for _, what in _sql_uses(PACKAGE / name)}
        assert allowed <= used, f"{name} no longer needs {allowed - used}"
