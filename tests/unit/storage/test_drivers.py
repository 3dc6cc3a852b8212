"""The driver adapter's table and refusals (no database: an in-memory SQLite engine stands for "not PostgreSQL")."""

from __future__ import annotations

import logging
import sys
import threading

import pytest
import sqlalchemy as sa

from venturi_sa.storage import drivers
from venturi_sa.storage.cancels import CANCEL_PAYLOAD
from venturi_sa.worker.listener import Listener, Probe, deliver


def test_every_async_driver_has_installed_sync_siblings_named_in_the_table() -> None:
    assert set(drivers.DRIVERS) == {"psycopg2", "psycopg", "asyncpg", "psycopg_async"}
    for driver in drivers.DRIVERS.values():
        assert driver.is_async == bool(driver.sync_siblings)
        assert all(not drivers.DRIVERS[s].is_async for s in driver.sync_siblings)
    assert all(not drivers.DRIVERS[name].is_async for name in drivers.DEFAULT_SYNC)


def test_a_blocked_module_is_not_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    assert drivers.DRIVERS["psycopg"].installed
    monkeypatch.setitem(sys.modules, "psycopg", None)
    assert not drivers.DRIVERS["psycopg"].installed and not drivers.DRIVERS["psycopg_async"].installed


def test_listen_refuses_drivers_without_an_adapter_and_bad_channels() -> None:
    engine = sa.create_engine("sqlite://")
    with pytest.raises(drivers.UnsupportedDriver, match="pysqlite has no LISTEN adapter"):
        drivers.listen(engine, ["jobs"])
    with pytest.raises(ValueError, match="not a lowercase SQL identifier"):
        drivers._checked(['jobs"; DROP TABLE x; --'])


def test_a_listener_on_an_unsupported_driver_warns_once_and_leaves_waking_to_polling(
        caplog: pytest.LogCaptureFixture) -> None:
    wake, stopping = threading.Event(), threading.Event()
    listener = Listener(sa.create_engine("sqlite://"), "jobs", wake, stopping)
    with caplog.at_level(logging.WARNING, logger="venturi_sa"):
        listener.start()
        listener.join(10)
    assert not listener.is_alive() and listener.deaf.is_set() and not stopping.is_set()
    [message] = [r.getMessage() for r in caplog.records]
    assert "no LISTEN adapter" in message and "polling" in message


def test_what_a_listener_heard_wakes_on_its_channel_and_nudges_on_a_cancel_there_only() -> None:
    """The one rule every listener (thread or loop task) applies to a wait's notifications."""
    probe = Probe(timeout=5.0)
    probe.sent()
    heard: dict[str, list[drivers.Notification]] = {
        "nothing": [],
        "probe": [drivers.Notification(probe.channel, "")],
        "cancel on the probe channel": [drivers.Notification(probe.channel, CANCEL_PAYLOAD)],
        "job": [drivers.Notification("jobs", "send_receipt")],
        "cancel": [drivers.Notification("jobs", "send_receipt"), drivers.Notification("jobs", CANCEL_PAYLOAD)],
    }
    got = {}
    for what, notes in heard.items():
        wake, nudge = threading.Event(), threading.Event()
        deliver(notes, probe, "jobs", wake, nudge)
        got[what] = (wake.is_set(), nudge.is_set())
    assert got == {"nothing": (False, False), "probe": (False, False), "cancel on the probe channel": (False, False),
                   "job": (True, False), "cancel": (True, True)}
    assert probe.deadline is None  # the probe was heard
    wake = threading.Event()
    deliver(heard["cancel"], probe, "jobs", wake, None)  # no keeper to nudge: it still wakes
    assert wake.is_set()
