"""The python examples in docs/ run against a real database.

Convention: a page opts in by naming this file in an HTML comment near its top
(``<!-- ... (tests/integration/docs/test_docs_examples.py) ... -->``).  Its
```` ```python ```` blocks then run in order, in one namespace per page that
starts with ``engine`` (an Engine, session time zone UTC) and ``prefix`` (a
fresh queue prefix whose tables do not exist yet).  A block opened with
```` ```python no-run ```` is shown, not run.  Pages that follow another
convention are tested elsewhere (e.g. test_quickstart.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa
from support.docblocks import blocks, exec_block
from support.paths import DOCS

MARKER = "test_docs_examples.py"


def pages() -> list[Path]:
    return sorted(p for p in DOCS.glob("*.md") if MARKER in p.read_text())



def test_the_guides_opt_in() -> None:
    names = {p.name for p in pages()}
    assert {"tasks.md", "workers.md"} <= names
    assert all(blocks(DOCS / name) for name in names)


@pytest.mark.parametrize("page", pages(), ids=lambda p: p.name)
def test_page_examples_run(page: Path, engine: sa.Engine, prefix: str) -> None:
    namespace: dict[str, object] = {"__name__": f"docs_{page.stem}", "engine": engine, "prefix": prefix}
    for line, code in blocks(page):
        exec_block(page, line, code, namespace)  # tracebacks point into the page
