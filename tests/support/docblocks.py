"""The one runner of the examples in docs/: find a page's fenced blocks, run them where the page says.

A python block runs compiled with its page's line numbers, so a traceback
points into the page.  A block opened with ```` ```python no-run ```` is shown,
not run, unless a test asks for it by its tags (docs/drivers.md's PgBouncer
blocks are ``python no-run pgbouncer``: tests/acceptance/storage runs them).
"""

from __future__ import annotations

import re
import sys
import types
from collections.abc import Collection
from pathlib import Path

BLOCK = re.compile(r"^```python([^\n]*)\n(.*?)^```\s*$", re.MULTILINE | re.DOTALL)


def blocks(page: Path, tags: Collection[str] = ()) -> list[tuple[int, str]]:
    """``(line number, code)`` of each python block, in order: those to run (not ``no-run``), or with ``tags``
    those whose info string carries every tag."""
    text = page.read_text()
    found = []
    for match in BLOCK.finditer(text):
        words = set(match.group(1).split())
        if (tags and not set(tags) <= words) or (not tags and "no-run" in words):
            continue
        found.append((text.count("\n", 0, match.start()) + 2, match.group(2)))
    return found


def fenced(path: Path, language: str) -> list[str]:
    """The fenced blocks of ``path`` whose info string is exactly ``language`` (so not ``no-run``)."""
    found: list[str] = []
    current: list[str] = []
    inside = keep = False
    for line in path.read_text().splitlines():
        if not inside and line.startswith("```"):
            inside, keep = True, line[3:].strip() == language
            current = []
        elif inside and line.startswith("```"):
            inside = False
            if keep:
                found.append("\n".join(current))
        elif inside:
            current.append(line)
    return found


def exec_block(page: Path, line: int, code: str, namespace: dict[str, object]) -> None:
    """Run one block of ``page`` (starting at ``line``) in ``namespace``."""
    exec(compile("\n" * (line - 1) + code, str(page), "exec"), namespace)  # noqa: S102 - running our docs is the point


def run(page: Path, namespace: dict[str, object], fresh_each: bool = False) -> int:
    """Run the page's blocks as a module (or one module per block); returns how many ran."""
    module = None
    ran = 0
    for line, code in blocks(page):
        if module is None or fresh_each:
            module = types.ModuleType(f"docs_{page.stem}_{ran}")
            module.__dict__.update(namespace)
            sys.modules[module.__name__] = module  # annotations (Mapped[int]) resolve through it
        try:
            exec_block(page, line, code, module.__dict__)
        finally:
            if fresh_each:
                sys.modules.pop(module.__name__, None)
        ran += 1
    if module is not None:
        sys.modules.pop(module.__name__, None)
    return ran
