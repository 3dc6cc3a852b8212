"""Helpers for the CLI and quick-start tests: user-style URLs and runnable doc examples."""

from __future__ import annotations

from pathlib import Path


def plain_url(pg_url: str) -> str:
    """The test URL as a user would type it (``postgresql://``, no driver)."""
    return pg_url.replace("postgresql+psycopg2://", "postgresql://", 1)


def doc_blocks(path: Path, language: str) -> list[str]:
    """The fenced blocks of ``path`` whose info string is exactly ``language`` (not ``no-run``)."""
    blocks, current, inside = [], [], False
    for line in path.read_text().splitlines():
        if not inside and line.startswith("```"):
            inside, keep = True, line[3:].strip() == language
            current = []
        elif inside and line.startswith("```"):
            inside = False
            if keep:
                blocks.append("\n".join(current))
        elif inside:
            current.append(line)
    return blocks
