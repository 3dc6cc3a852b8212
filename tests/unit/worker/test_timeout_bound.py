"""Issue 23 defect 9: a time limit the worker's timer cannot hold is refused, at enqueue and at declaration.

``timeout=timedelta.max`` used to be accepted; the worker's ``threading.Timer``
then raised ``OverflowError`` in its own thread and the run had no limit.
"""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import pytest

from venturi_sa import InvalidOption, JobContext, Task, task
from venturi_sa.declarations.time_checks import check_timeout
from venturi_sa.enqueue import prepared
from venturi_sa.task import Registry


class Plain(Task):
    KIND = "plain"


def test_a_timeout_the_timer_cannot_hold_is_refused_at_enqueue() -> None:
    with pytest.raises(InvalidOption, match="timeout must be at most 30 days"):
        check_timeout(timedelta.max)
    with pytest.raises(InvalidOption, match="timeout"):
        prepared(Registry([Plain]), [Plain()], timeout=timedelta.max)
    assert check_timeout(timedelta(days=30)) == timedelta(days=30)


def test_a_timeout_the_timer_cannot_hold_is_refused_at_declaration() -> None:
    with pytest.raises(InvalidOption, match="Forever.timeout must be at most 30 days"):
        class Forever(Task):
            KIND = "forever"
            timeout = timedelta.max

    with pytest.raises(InvalidOption, match="timeout must be at most"):
        @task("forever_fn", timeout=timedelta(days=10_000))
        def forever(payload: Any, ctx: JobContext) -> None:
            pass

    with pytest.raises(InvalidOption, match="lease must be a timedelta of 1 second to 1 day"):
        @task("long_lease", lease=timedelta.max)
        def long_lease(payload: Any, ctx: JobContext) -> None:
            pass


def test_the_longest_timeout_fits_the_timer() -> None:
    """``threading.Timer`` waits on a lock; past ``TIMEOUT_MAX`` that wait raises ``OverflowError``."""
    from venturi_sa.declarations.time_checks import MAX_TIMEOUT

    assert MAX_TIMEOUT.total_seconds() < threading.TIMEOUT_MAX < timedelta.max.total_seconds()
    with pytest.raises(OverflowError):
        threading.Lock().acquire(timeout=timedelta.max.total_seconds())
    fired = threading.Event()
    timer = threading.Timer(MAX_TIMEOUT.total_seconds(), fired.set)
    timer.start()
    timer.cancel()
    timer.join(5)
    assert not timer.is_alive() and not fired.is_set()
