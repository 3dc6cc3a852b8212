"""One import direction: a module imports only from its own layer or the layers below it, and no circle.

Every import counts: module level, inside ``if TYPE_CHECKING:``, and inside a
function.  The layers, lowest first, are :data:`LAYERS` (docs/architecture.md
states them and why).  A module of a package belongs to its package's layer
unless :data:`LAYERS` names the module itself.  An import against the
direction is allowed only as a named exception in :data:`EXCEPTIONS`, with the
reason a newcomer needs; there are none today.  Separately, no two modules may
import each other, directly or round a circle of any length.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from pathlib import Path

import alembic_venturi
import venturi_sa

ROOTS = {"venturi_sa": Path(venturi_sa.__file__).resolve().parent,
         "alembic_venturi": Path(alembic_venturi.__file__).resolve().parent}

# Lowest first.  Names are dotted module or package names; a package stands for every module in it.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("base: errors, states and the table-name prefix", (
        "venturi_sa.errors", "venturi_sa.states", "venturi_sa.prefix")),
    ("declarations: pure values and their checks, no database", (
        "venturi_sa.declarations", "venturi_sa.payloads", "venturi_sa.metrics", "venturi_sa.binds",
        "venturi_sa.periodic.timing")),  # fire times: stdlib, croniter and errors only; ops.schedules resumes by it
    ("schema: the mapped tables and the migrations", ("venturi_sa.models", "alembic_venturi")),
    ("storage: every SQL statement", ("venturi_sa.storage",)),
    ("tasks: the Task class and what it declares", ("venturi_sa.task", "venturi_sa.limit_keying")),
    ("adding jobs: enqueue, links, merges, owed calls", (
        "venturi_sa.enqueue", "venturi_sa.merging", "venturi_sa.workflows", "venturi_sa.session_adds",
        "venturi_sa.workflow_adds", "venturi_sa.owed_calls")),
    ("operations: the operator face", ("venturi_sa.ops",)),
    ("periodic: schedules declared, reconciled and fired", ("venturi_sa.periodic",)),
    ("the queue: one application's tasks, models and operations", ("venturi_sa.queue", "venturi_sa.run_hooks")),
    ("the worker", ("venturi_sa.worker",)),
    ("faces: the dashboard, the command line, framework glue, test helpers, the package's names", (
        "venturi_sa.web", "venturi_sa.cli", "venturi_sa.contrib", "venturi_sa.testing", "venturi_sa.devtools",
        "venturi_sa", "venturi_sa.__main__")),
)

# Entries that stand for the package's own ``__init__`` only, not for the modules in it.
WHOLE_ONLY = frozenset({"venturi_sa"})

# (importer, imported) -> why this import runs against the direction.
EXCEPTIONS: dict[tuple[str, str], str] = {}


def module_files() -> dict[str, Path]:
    """Every module of both packages by dotted name (a package by its own name)."""
    found: dict[str, Path] = {}
    for top, root in ROOTS.items():
        for path in root.rglob("*.py"):
            if "__pycache__" in path.parts:
                continue
            parts = [top, *path.relative_to(root).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def imports_of(name: str, source: str, is_package: bool, known: Iterable[str]) -> set[str]:
    """The known modules ``source`` imports anywhere in it (``TYPE_CHECKING`` blocks and functions too)."""
    known = set(known)
    package = name if is_package else name.rpartition(".")[0]
    targets: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            candidates = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[:len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, *([base] if base else [])])
            candidates = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base
                          for alias in node.names]
        else:
            continue
        for candidate in candidates:
            while candidate and candidate not in known:
                candidate = candidate.rpartition(".")[0]
            if candidate and candidate != name:
                targets.add(candidate)
    return targets


def import_graph() -> dict[str, set[str]]:
    files = module_files()
    return {name: imports_of(name, path.read_text(encoding="utf-8"), path.name == "__init__.py", files)
            for name, path in files.items()}


def layer_of(name: str) -> int | None:
    """The index in :data:`LAYERS` of the most specific entry naming ``name`` or a package holding it."""
    best: tuple[int, int] | None = None
    for index, (_, members) in enumerate(LAYERS):
        for member in members:
            if name == member or (name.startswith(member + ".") and member not in WHOLE_ONLY):
                if best is None or len(member) > best[1]:
                    best = (index, len(member))
    return None if best is None else best[0]


def against_direction(graph: Mapping[str, set[str]]) -> list[str]:
    found = []
    for importer, imported in sorted((a, b) for a, targets in graph.items() for b in targets):
        low, high = layer_of(importer), layer_of(imported)
        if low is not None and high is not None and high > low and (importer, imported) not in EXCEPTIONS:
            found.append(f"{importer} ({LAYERS[low][0].split(':')[0]}) imports {imported} "
                         f"({LAYERS[high][0].split(':')[0]})")
    return found


def circles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    groups.append(sorted(group))
    return groups


def test_every_module_has_a_layer() -> None:
    unplaced = sorted(name for name in module_files() if layer_of(name) is None)
    assert not unplaced, f"modules in no layer (add them to LAYERS and docs/architecture.md): {unplaced}"


def test_every_import_follows_the_direction() -> None:
    found = against_direction(import_graph())
    assert not found, "imports against the layer direction:\n" + "\n".join(found)


def test_no_import_circle() -> None:
    found = circles(import_graph())
    assert not found, "import circles: " + "; ".join(" <-> ".join(group) for group in found)


def test_every_exception_is_still_needed_and_says_why() -> None:
    graph = import_graph()
    stale = sorted(f"{a} -> {b}" for a, b in EXCEPTIONS if b not in graph.get(a, set()))
    assert not stale, f"EXCEPTIONS no longer imported (remove them): {stale}"
    assert all(reason.strip() for reason in EXCEPTIONS.values())


def test_the_scanner_sees_type_only_and_function_level_imports() -> None:
    """The check itself: a ``TYPE_CHECKING`` import and a function's import are edges, and run upward."""
    known = {"venturi_sa.task", "venturi_sa.worker", "venturi_sa.worker.context", "venturi_sa.storage",
             "venturi_sa.storage.claim"}
    source = ("from typing import TYPE_CHECKING\n"
              "if TYPE_CHECKING:\n    from venturi_sa.worker.context import JobContext\n"
              "def f():\n    from . import storage\n    from .storage import claim\n")
    edges = imports_of("venturi_sa.task", source, False, known)
    assert edges == {"venturi_sa.worker.context", "venturi_sa.storage", "venturi_sa.storage.claim"}
    assert against_direction({"venturi_sa.task": edges}) == [
        "venturi_sa.task (tasks) imports venturi_sa.worker.context (the worker)"]
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
