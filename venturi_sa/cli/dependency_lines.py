"""``venturi jobs show``'s parents and dependents (``after=``): as text lines and as JSON."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from venturi_sa.cli.output import table
from venturi_sa.ops.dependents import DependentInfo, ParentInfo


def render(parents: Sequence[ParentInfo], dependents: Sequence[DependentInfo]) -> str:
    """Two sections, each left out when empty: the parents in ``after=`` order, then the dependents."""
    parts = []
    if parents:
        rows = [[p.id, p.kind, p.status, p.note] for p in parents]
        parts.append(f"parents:\n{table(('id', 'kind', 'status', 'note'), rows)}")
    if dependents:
        rows = [[d.id, d.kind, d.status, d.if_parent_dead] for d in dependents]
        parts.append(f"dependents:\n{table(('id', 'kind', 'status', 'if parent dead'), rows)}")
    return "\n\n".join(parts)


def as_json(parents: Sequence[ParentInfo], dependents: Sequence[DependentInfo]) -> dict[str, Any]:
    return {"parents": [asdict(p) for p in parents], "dependents": [asdict(d) for d in dependents]}
