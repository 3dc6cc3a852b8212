"""The Schedules & pauses page lists the overridden limits with their use."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import sqlalchemy as sa
from starlette.testclient import TestClient

from venturi_sa import Queue, Rate


def test_the_page_lists_overridden_limits(engine: sa.Engine, models: Any, client: TestClient) -> None:
    page = client.get("/schedules").text
    assert 'id="limits"' in page and "no limit is overridden" in page
    queue = Queue(models)
    queue.set_limit(engine, "partner.call", global_concurrency=5, rate_limit=Rate(100, timedelta(minutes=1)),
                    actor="ops")
    page = client.get("/schedules").text
    assert "partner.call" in page and "global_concurrency" in page and "100/60s" in page
    assert "no limit is overridden" not in page
