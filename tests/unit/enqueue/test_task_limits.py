"""Limits declared on a task class: checked when the class is defined; ``@task`` accepts them."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from venturi_sa import InvalidOption, Rate, Task, task
from venturi_sa.declarations.limit_rules import KindLimits, check_key
from venturi_sa.task import declared_limits, declared_limits_of


def test_declared_limits_are_read_from_the_class() -> None:
    class Export(Task):
        KIND = "export_declared"
        global_concurrency = 10
        key_concurrency = 2
        key_rate_limit = Rate(5, timedelta(seconds=30))

        def limit_key(self) -> str | None:
            return "k"

    class Plain(Task):
        KIND = "plain_declared"

    assert declared_limits(Export) == KindLimits(global_concurrency=10, key_concurrency=2,
                                                 key_rate_limit=Rate(5, timedelta(seconds=30)), keyed=True)
    assert declared_limits_of([Export, Plain]) == {"export_declared": declared_limits(Export)}
    assert not declared_limits(Plain).any


@pytest.mark.parametrize(("attrs", "message"), [
    ({"global_concurrency": 0}, "global_concurrency must be None or an integer from 1 to 2147483647, got 0 .*pause"),
    ({"global_concurrency": True}, "global_concurrency"),
    ({"rate_limit": 5}, "rate_limit must be None or venturi_sa.Rate"),
    ({"key_concurrency": 3}, "does not override limit_key"),
    ({"key_rate_limit": Rate(1, timedelta(seconds=1))}, "does not override limit_key"),
    ({"global_concurrency": 2**31}, "from 1 to 2147483647, got 2147483648"),
    ({"max_failures": 2**31}, "max_failures must be an integer from 1 to 2147483647"),
    ({"concurrency": 2**40}, "concurrency must be None or an integer from 1 to 2147483647"),
])
def test_a_bad_limit_raises_when_the_class_is_defined(attrs: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidOption, match=message):
        type("Bad", (Task,), {"KIND": "bad_limit", **attrs})


@pytest.mark.parametrize(("limit", "per"), [(0, timedelta(seconds=1)), (5, timedelta(0)), (5, timedelta(days=2)),
                                            (5, 60), (2**31, timedelta(seconds=1))])
def test_a_bad_rate_is_refused(limit: Any, per: Any) -> None:
    with pytest.raises(InvalidOption):
        Rate(limit, per)


def test_the_task_decorator_accepts_the_limits_and_a_limit_key() -> None:
    @task("decorated_limits", global_concurrency=3, key_concurrency=1, rate_limit=Rate(100, timedelta(minutes=1)),
          limit_key=lambda payload: "tenant")
    def export(payload: Any, ctx: Any) -> None:
        """Export."""

    assert export.global_concurrency == 3 and export.key_concurrency == 1
    assert export().limit_key() == "tenant"
    assert str(export.rate_limit) == "100/60s"


def test_a_limit_key_must_be_a_short_non_empty_string() -> None:
    assert check_key(None, "k") is None
    assert check_key("tenant-1", "k") == "tenant-1"
    for bad in ("", "x" * 201, "a\x00b", 42):
        with pytest.raises(InvalidOption, match="limit_key"):
            check_key(bad, "k")
