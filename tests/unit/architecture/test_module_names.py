"""Module names say what a module holds, without its package: no unlisted twins, no catch-alls.

A basename used in more than one package of ``venturi_sa`` is allowed only as
a deliberate pair listed in :data:`SHARED_NAMES` (typically an API and the SQL
it runs), each with the reason a newcomer needs.  A module may not share its
name with a package (``storage/testing.py`` beside ``testing/`` was one),
except the few listed in :data:`PACKAGE_NAMED_MODULES`.  ``utils``,
``helpers``, ``common`` and ``misc`` say nothing and are refused outright.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import venturi_sa

ROOT = Path(venturi_sa.__file__).resolve().parent

# basename -> (the packages holding it, "" for venturi_sa itself; why the name is shared)
SHARED_NAMES: dict[str, tuple[frozenset[str], str]] = {
    "admin.py": (frozenset({"ops", "storage"}), "operator actions on one job: the API and its SQL"),
    "app.py": (frozenset({"web", "worker"}), "each side's application object: the dashboard ASGI app, WorkerApp"),
    "archive.py": (frozenset({"ops", "storage"}), "the archive: queue.archive and its retention, and their SQL"),
    "cancel.py": (frozenset({"ops", "worker"}), "cancel: the operator's action, and the delivery to a running handler"),
    "checkpoint.py": (frozenset({"worker", "storage"}), "ctx.checkpoint in a running handler, and its fenced write"),
    "cleanup.py": (frozenset({"ops", "storage"}), "retention cleanup: the API and its SQL"),
    "clock.py": (frozenset({"testing", "storage"}), "the test clock: the helper and its SQL"),
    "dependents.py": (frozenset({"ops", "storage"}), "jobs that wait for other jobs: the operations and their SQL"),
    "enqueue.py": (frozenset({"", "storage"}), "enqueue: validation and merge decisions, and its SQL"),
    "explain.py": (frozenset({"ops", "storage"}), "why a job is not running: the API and the facts its SQL reads"),
    "history.py": (frozenset({"ops", "storage"}), "job history reads: the API and its SQL"),
    "limits.py": (frozenset({"ops", "storage", "cli"}), "limits: the operations, their SQL, and `venturi limits`"),
    "owed_calls.py": (frozenset({"", "worker", "storage"}), "owed on_dead calls: making them, the worker's thread "
                      "that makes its kinds', and their rows' SQL"),
    "pauses.py": (frozenset({"storage", "web"}), "paused kinds: their SQL, and the dashboard's pause operations"),
    "pipeline.py": (frozenset({"worker", "testing"}), "a run's lifecycle, and the test helper driving that pipeline"),
    "schedules.py": (frozenset({"ops", "storage", "cli"}), "periodic schedules: the operations (list, pause, "
                     "resume, run now), their SQL, and `venturi schedules`"),
    "session_adds.py": (frozenset({"", "storage"}), "jobs added with session.add: the flush listeners and their SQL"),
    "stats.py": (frozenset({"ops", "storage"}), "queue statistics: the API and its SQL"),
}

# (package, module basename) -> why a module is named like a package
PACKAGE_NAMED_MODULES: dict[tuple[str, str], str] = {
    ("worker", "worker.py"): "the worker package's facade, the Worker class that wires its parts",
    ("cli", "ops.py"): "the `venturi stats`, `venturi cleanup` and `venturi archive` commands over the ops face",
}

CATCH_ALLS = {"utils", "util", "helpers", "helper", "common", "misc"}


def modules() -> list[Path]:
    return [p for p in ROOT.rglob("*.py") if "__pycache__" not in p.parts and p.name not in ("__init__.py",
                                                                                             "__main__.py")]


def package_of(path: Path) -> str:
    return "/".join(path.parent.relative_to(ROOT).parts)


def packages() -> set[str]:
    return {p.parent.name for p in ROOT.rglob("__init__.py") if p.parent != ROOT}


def shared_basenames(paths: list[Path]) -> dict[str, frozenset[str]]:
    """Every basename found in more than one package, with those packages."""
    where: dict[str, set[str]] = defaultdict(set)
    for path in paths:
        where[path.name].add(package_of(path))
    return {name: frozenset(pkgs) for name, pkgs in where.items() if len(pkgs) > 1}


def unlisted(shared: dict[str, frozenset[str]]) -> list[str]:
    """The shared basenames not in :data:`SHARED_NAMES` with exactly those packages."""
    return sorted(f"{name} in {sorted(pkgs)}" for name, pkgs in shared.items()
                  if name not in SHARED_NAMES or SHARED_NAMES[name][0] != pkgs)


def test_every_shared_module_name_is_a_listed_pair() -> None:
    found = unlisted(shared_basenames(modules()))
    assert not found, ("module names shared across packages without an entry in SHARED_NAMES (name the module "
                       f"for what it holds, or list the pair with its reason): {found}")


def test_the_table_lists_no_pair_that_is_gone() -> None:
    shared = shared_basenames(modules())
    stale = sorted(name for name in SHARED_NAMES if name not in shared)
    assert not stale, f"SHARED_NAMES entries no longer shared (remove them): {stale}"


def test_every_listed_pair_says_why() -> None:
    assert all(reason.strip() for _, reason in SHARED_NAMES.values())
    assert all(reason.strip() for reason in PACKAGE_NAMED_MODULES.values())


def test_no_module_is_named_like_a_package() -> None:
    names = packages()
    clashes = sorted(f"{package_of(p) or 'venturi_sa'}/{p.name}" for p in modules()
                     if p.stem in names and (package_of(p), p.name) not in PACKAGE_NAMED_MODULES)
    assert not clashes, f"modules named like a package of venturi_sa: {clashes}"


def test_no_catch_all_modules() -> None:
    found = sorted(str(p.relative_to(ROOT)) for p in modules() if p.stem in CATCH_ALLS)
    found += sorted(name for name in packages() if name in CATCH_ALLS)
    assert not found, f"catch-all module names say nothing of what they hold: {found}"


def test_a_new_unlisted_collision_is_caught() -> None:
    """The check itself: a second ``claim.py`` under ``worker`` is reported, a listed pair is not."""
    paths = [ROOT / "storage" / "claim.py", ROOT / "worker" / "claim.py",
             ROOT / "ops" / "stats.py", ROOT / "storage" / "stats.py"]
    assert unlisted(shared_basenames(paths)) == ["claim.py in ['storage', 'worker']"]
    assert unlisted(shared_basenames([ROOT / "stats.py", ROOT / "storage" / "stats.py"])) == [
        "stats.py in ['', 'storage']"]


def test_only_the_command_line_imports_the_devtools() -> None:
    """``venturi_sa.devtools`` (the throwaway cluster) is tooling: no runtime module imports it."""
    importers = []
    for path in modules():
        if package_of(path).split("/")[0] in ("cli", "devtools"):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names = ([f"{node.module}.{a.name}" for a in node.names] if isinstance(node, ast.ImportFrom)
                     else [a.name for a in node.names] if isinstance(node, ast.Import) else [])
            if any(name == "venturi_sa.devtools" or name.startswith("venturi_sa.devtools.") for name in names):
                importers.append(str(path.relative_to(ROOT)))
    assert not importers, f"runtime modules importing venturi_sa.devtools: {importers}"
