"""Testing applications that use venturi: assertions, drain, perform, the clock, inline mode.

Everything works in the test's own session and transaction, so it sees the
jobs the code under test enqueued without committing them, and leaves
nothing behind when the test's transaction is rolled back.  The pytest
plugin (:mod:`venturi_sa.testing.plugin`, registered as ``venturi``) adds
fixtures on top.  Guide: ``docs/testing.md``.
"""

from __future__ import annotations

from venturi_sa.testing.assertions import assert_enqueued, enqueued, refute_enqueued
from venturi_sa.testing.async_session import (
    AsyncClock,
    assert_enqueued_async,
    clock_async,
    drain_async,
    enqueued_async,
    purge_async,
    refute_enqueued_async,
    rolled_back_async_session,
    signal_async,
)
from venturi_sa.testing.clock import Clock, clock
from venturi_sa.testing.drain import DrainedRun, DrainError, DrainResult, drain
from venturi_sa.testing.inline import InlineOutsideTests, InlineRunner, inline
from venturi_sa.testing.perform import Performed, RejectedOutcome, perform, perform_async
from venturi_sa.testing.purge import purge
from venturi_sa.testing.sessions import rolled_back_session
from venturi_sa.testing.sleeps import signal

__all__ = [
    "AsyncClock",
    "Clock",
    "DrainError",
    "DrainResult",
    "DrainedRun",
    "InlineOutsideTests",
    "InlineRunner",
    "Performed",
    "RejectedOutcome",
    "assert_enqueued",
    "assert_enqueued_async",
    "clock",
    "clock_async",
    "drain",
    "drain_async",
    "enqueued",
    "enqueued_async",
    "inline",
    "perform",
    "perform_async",
    "purge",
    "purge_async",
    "refute_enqueued",
    "refute_enqueued_async",
    "rolled_back_async_session",
    "rolled_back_session",
    "signal",
    "signal_async",
]
