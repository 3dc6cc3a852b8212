"""``cleanup`` and ``archive`` batch sizes are bounded before any SQL (a huge one was a database error)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa

from venturi_sa import InvalidOption, Queue


@pytest.mark.parametrize("size", [2**31, 2**63, True, 0])
def test_batch_sizes_past_32_bits_are_refused_naming_the_bound(engine: sa.Engine, models: Any, size: int) -> None:
    queue = Queue(models)
    with pytest.raises(InvalidOption, match="cleanup batch_size must be an integer from 1 to 2147483647"):
        queue.cleanup(engine, older_than=timedelta(days=1), batch_size=size)
    with pytest.raises(InvalidOption, match="archive batch_size must be an integer from 1 to 2147483647"):
        queue.archive(engine, older_than=timedelta(0), batch_size=size)
    assert queue.cleanup(engine, older_than=timedelta(days=1), batch_size=2**31 - 1) == 0
