"""Debounce and throttle are checked when the class is defined, naming what is wrong."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from venturi_sa import Debounce, InvalidOption, Queue, Task, make_models, task
from venturi_sa.declarations.merge_rules import NO_TIMING, held_sentence
from venturi_sa.merging import timing_of

S = timedelta(seconds=1)


def keyed(**policy: Any) -> type[Task]:
    namespace = {"KIND": "k", "dedup_key": lambda self: "x", **policy}
    return type("Keyed", (Task,), namespace)


@pytest.mark.parametrize(("window", "max_wait", "match"), [
    (timedelta(0), None, "Debounce window must be a positive timedelta"),
    (-S, None, "Debounce window must be a positive timedelta"),
    (5, None, "Debounce window must be a positive timedelta, got 5"),
    (timedelta(days=31), None, "Debounce window must be at most 30 days"),
    (10 * S, timedelta(0), "Debounce max_wait must be a positive timedelta"),
    (10 * S, 5 * S, r"Debounce max_wait \(0:00:05\) must be at least the window \(0:00:10\)"),
])
def test_a_bad_debounce_is_refused_at_once(window: Any, max_wait: Any, match: str) -> None:
    with pytest.raises(InvalidOption, match=match):
        Debounce(window, max_wait=max_wait)


def test_max_wait_equal_to_the_window_is_allowed() -> None:
    assert Debounce(10 * S, 10 * S).max_wait == 10 * S


@pytest.mark.parametrize(("policy", "match"), [
    ({"debounce": timedelta(seconds=5)}, r"Keyed.debounce must be None or venturi_sa.Debounce"),
    ({"throttle": timedelta(0)}, "Keyed.throttle must be a positive timedelta"),
    ({"throttle": 60}, "Keyed.throttle must be a positive timedelta, got 60"),
    ({"throttle": timedelta(days=40)}, "Keyed.throttle must be at most 30 days"),
])
def test_a_bad_policy_is_refused_when_the_class_is_defined(policy: dict[str, Any], match: str) -> None:
    with pytest.raises(InvalidOption, match=match):
        keyed(**policy)


@pytest.mark.parametrize("policy", [{"debounce": Debounce(S)}, {"throttle": S}])
def test_a_policy_without_a_dedup_key_is_refused(policy: dict[str, Any]) -> None:
    name = next(iter(policy))
    with pytest.raises(InvalidOption, match=rf"Plain.{name} is keyed by dedup_key, but Plain does not override"):
        type("Plain", (Task,), {"KIND": "plain", **policy})
    with pytest.raises(InvalidOption, match="does not override dedup_key"):
        task("plain_fn", **policy)(lambda payload, ctx: None)


def test_task_accepts_both_policies_and_timing_reads_them() -> None:
    made = task("both", dedup_key=lambda p: "k", debounce=Debounce(S, 3 * S), throttle=2 * S)(lambda p, c: None)
    timing = timing_of(made)
    assert (timing.window, timing.max_wait, timing.throttle) == (S, 3 * S, 2 * S)
    assert not timing_of(keyed())


def test_a_subclass_inherits_the_policy_and_its_key() -> None:
    base = keyed(throttle=S)
    child = type("Child", (base,), {"KIND": "child"})
    assert child.throttle == S


def test_the_explain_sentence_names_the_policy_and_the_time() -> None:
    at = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
    both = keyed(debounce=Debounce(30 * S, timedelta(minutes=5)), throttle=timedelta(minutes=1))
    assert held_sentence(timing_of(both), at) == (
        "scheduled: debounced until 2026-01-02T03:04:05+00:00 (0:00:30 after the key's latest enqueue, at most "
        "0:05:00 after the key's first enqueue); throttled until 2026-01-02T03:04:05+00:00 "
        "(one start per 0:01:00 per key)")
    assert held_sentence(timing_of(keyed()), at) is None and held_sentence(NO_TIMING, at) is None


def test_queue_job_refuses_a_debounced_task_as_any_keyed_task() -> None:
    settle = keyed(debounce=Debounce(S))
    queue = Queue(make_models("debounce_unit"), [settle])
    with pytest.raises(InvalidOption, match=r"has a dedup key \('x'\).*use queue.enqueue"):
        queue.job(settle())
