"""The periodic tier reuses the integration tier's helpers (queue_kit: wait_until, running)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))
