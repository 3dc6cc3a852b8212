"""An archived job's journal is folded like the live one: consecutive ``merged`` rows make one line."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any, NamedTuple

import pytest

from venturi_sa.ops.job_sections import fold

pytestmark = pytest.mark.timeout(10)
T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


class Row(NamedTuple):
    id: int
    job_id: str
    kind: str
    run_no: int
    recorded_at: datetime
    outcome: str
    note: str | None
    attachment: Any

    @property
    def _mapping(self) -> dict[str, Any]:
        return self._asdict()


def _rows(*outcomes: str) -> list[Row]:
    return [Row(i, "j", "k", 0, T0 + timedelta(seconds=i), o, None, None) for i, o in enumerate(outcomes, 1)]


def test_runs_of_merged_rows_fold_and_pages_start_at_a_line() -> None:
    rows = _rows("merged", "merged", "merged", "retried", "merged", "completed")
    lines = fold(rows, 0, 10)
    assert [(line.entry.outcome, line.entries, line.last_id) for line in lines] == [
        ("merged", 3, 3), ("retried", 1, 4), ("merged", 1, 5), ("completed", 1, 6)]
    assert lines[0].last_recorded_at == T0 + timedelta(seconds=3)
    assert [line.entry.id for line in fold(rows, 0, 2)] == [1, 4]
    assert [line.entry.id for line in fold(rows, 4, 2)] == [4, 5]
