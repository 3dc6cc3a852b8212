"""The bulk insert's one parameter: new jobs as a JSON document, and the SQL that reads it back as rows.

``[[id, kind, payload, priority, dedup_key], ...]`` in one text parameter
instead of one array parameter per column: the driver quotes one string
instead of every value of five arrays, each payload is written once, inside
the document, instead of as a JSON string of its own, and PostgreSQL parses
one ``jsonb`` value instead of a thousand.  Used by
:mod:`venturi_sa.storage.enqueue`; nothing here touches a session.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

DUMPS = json.JSONEncoder(separators=(",", ":")).encode  # json.dumps, compact
MAX_DOCUMENT_CHARS = 64 * 1024 * 1024
"""The longest document one INSERT sends; a longer batch goes in several (one ``jsonb`` value holds 256 MiB)."""

COLUMNS: tuple[tuple[str, Any], ...] = (
    ("id", sa.Text), ("kind", sa.Text), ("payload", None), ("priority", sa.SmallInteger), ("dedup_key", sa.Text))
"""The values of one new job in the document, in order (``payload`` is taken as JSON, not as text)."""


def as_rows() -> list[Any]:
    """The bind parameter ``jobs`` (a document) as labelled columns of :data:`COLUMNS`, one row per job."""
    document = sa.cast(sa.bindparam("jobs", type_=sa.Text), postgresql.JSONB)
    element = sa.func.jsonb_array_elements(document).table_valued(
        sa.column("value", postgresql.JSONB)).render_derived(name="new_job").c.value
    return [(element[i] if type_ is None else sa.cast(element[i].astext, type_)).label(name)
            for i, (name, type_) in enumerate(COLUMNS)]


def documents(rows: Sequence[tuple[Any, ...]]) -> list[str]:
    """``rows`` (values in :data:`COLUMNS` order) as documents of at most :data:`MAX_DOCUMENT_CHARS`, in order.

    Almost always one; a batch of large payloads is halved until each part
    fits (a single row is sent whole: its payload was bounded when checked).
    Each document is one INSERT, in the caller's transaction.
    """
    document = DUMPS(list(rows))
    if len(document) <= MAX_DOCUMENT_CHARS or len(rows) == 1:
        return [document]
    half = len(rows) // 2
    return documents(rows[:half]) + documents(rows[half:])
