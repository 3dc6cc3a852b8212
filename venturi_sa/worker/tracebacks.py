"""What a failed run keeps of its exception: the last frames, bounded, on its journal entry.

A handler's exception is logged once at WARNING with its full traceback;
the journal row of that run keeps ``{"error": {"exception": ..., "frames":
[...]}}`` as its attachment (unless the handler had set one), with at most
:data:`FRAMES` frames of :data:`FRAME_CHARS` characters each, innermost last.
"""

from __future__ import annotations

import traceback
from typing import Any

FRAMES = 8
FRAME_CHARS = 300


def error_attachment(exc: BaseException, note: str) -> dict[str, Any]:
    """The bounded record of ``exc`` (its ``note`` and last frames) for the run's journal entry."""
    frames = traceback.extract_tb(exc.__traceback__)[-FRAMES:]
    lines = [f"{f.filename}:{f.lineno} in {f.name}: {(f.line or '').strip()}"[:FRAME_CHARS] for f in frames]
    return {"error": {"exception": note[:FRAME_CHARS * 2], "frames": lines}}
