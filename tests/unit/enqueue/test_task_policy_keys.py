"""``task(...)`` and ``queue.task(...)`` refuse policy keys they do not know, naming a close match."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from venturi_sa import Queue, make_models, task
from venturi_sa.errors import InvalidOption
from venturi_sa.task import POLICY_KEYS


def test_unknown_keys_are_named_with_suggestions_and_the_valid_keys() -> None:
    with pytest.raises(InvalidOption) as raised:
        task("k", leese=5, max_failure=2)
    message = str(raised.value)
    assert message.startswith("task() got unknown policy keys ")
    assert "'leese' (did you mean 'lease'?)" in message
    assert "'max_failure' (did you mean 'max_failures'?)" in message
    assert "valid keys: payload, carry, " + ", ".join(POLICY_KEYS) in message


def test_a_key_with_no_close_match_is_named_alone() -> None:
    with pytest.raises(InvalidOption, match=r"unknown policy key 'colour'; valid keys"):
        task("k", colour="red")


def test_queue_task_refuses_them_too_before_anything_is_registered() -> None:
    queue = Queue(make_models("policy_keys"))
    with pytest.raises(InvalidOption, match=r"queue.task\(\) got unknown policy key 'concurency' "
                                            r"\(did you mean 'concurrency'\?\)"):
        queue.task("k", concurency=2)
    assert queue.registry.kinds == []


def test_every_valid_key_is_accepted() -> None:
    policy: dict[str, Any] = {"priority": 0, "max_failures": 2, "lease": timedelta(seconds=5), "concurrency": 1,
                              "backoff": lambda n: timedelta(seconds=n), "dedup_key": lambda payload: None}
    made = task("k_all", **policy)(lambda payload, ctx: None)
    assert (made.max_failures, made.concurrency, made.backoff(3)) == (2, 1, timedelta(seconds=3))
