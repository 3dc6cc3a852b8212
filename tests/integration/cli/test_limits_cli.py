"""``venturi limits list|set|clear`` against a real database."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from support.cli import fails, ok, plain_url
from support.cli import invoke as run

from venturi_sa import InvalidOption, Queue, Rate

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def db(pg_url: str, prefix: str, models: Any) -> list[str]:
    return ["--dsn", plain_url(pg_url), "--prefix", prefix]


def test_set_list_and_clear(db: list[str], engine: sa.Engine, models: Any) -> None:
    assert "no limits" in ok(run("limits", "list", *db)).stdout
    shown = ok(run("limits", "set", *db, "--actor", "ops", "--global", "5", "--rate", "100/1m", "partner.call"))
    assert "global_concurrency" in shown.stdout and "100/60s" in shown.stdout
    infos = {i.name: i for i in Queue(models).limits(engine)}
    assert infos["global_concurrency"].value == 5
    assert infos["rate_limit"].value == Rate(100, timedelta(minutes=1))
    ok(run("limits", "set", *db, "--rate", "none", "partner.call"))
    listed = json.loads(ok(run("limits", "list", *db, "--json")).stdout)
    assert {(i["name"], i["value"]) for i in listed} == {("global_concurrency", 5), ("rate_limit", None)}
    assert "cleared rate_limit" in ok(run("limits", "clear", *db, "partner.call", "rate_limit")).stdout
    assert "cleared global_concurrency" in ok(run("limits", "clear", *db, "partner.call")).stdout
    assert "no override to clear" in ok(run("limits", "clear", *db, "partner.call")).stdout


def test_bad_values_are_refused(db: list[str]) -> None:
    assert run("limits", "set", *db, "--global", "lots", "k").exit_code != 0
    assert run("limits", "set", *db, "--rate", "100", "k").exit_code != 0
    fails(run("limits", "set", *db, "--global", "0", "k"), "global_concurrency")


def test_a_key_limit_for_a_kind_without_limit_key_is_refused_with_app(db: list[str], pg_url: str,
                                                                      prefix: str, engine: sa.Engine) -> None:
    app = ["--app", "limits_app:app"]
    env = {"VENTURI_PREFIX": prefix, "VENTURI_DSN": plain_url(pg_url)}
    for option, value in (("--per-key", "1"), ("--key-rate", "5/1m")):
        fails(run("limits", "set", *app, *db, option, value, "partner", env=env),
              "kind 'partner' declares no limit_key")
    assert "no limits" in ok(run("limits", "list", *db)).stdout  # nothing written
    shown = ok(run("limits", "set", *app, *db, "--per-key", "2", "export", env=env)).stdout
    assert "key_concurrency" in shown and "override" in shown
    listed = json.loads(ok(run("limits", "list", *app, *db, "--json", env=env)).stdout)
    assert ("partner", "global_concurrency", "declared") in {(i["kind"], i["name"], i["source"]) for i in listed}


def test_limits_of_32_bits_or_more_are_refused_before_the_database(db: list[str], engine: sa.Engine,
                                                                    models: Any) -> None:
    fails(run("limits", "set", *db, "--global", str(2**31), "k"), "2147483647")
    fails(run("limits", "set", *db, "--rate", f"{2**31}/1m", "k"), "2147483647")
    queue = Queue(models)
    for values in ({"global_concurrency": 2**31}, {"key_concurrency": 10**30},
                   {"rate_limit": Rate(2**31 - 1, timedelta(seconds=1)), "global_concurrency": 2**40}):
        with pytest.raises(InvalidOption, match="from 1 to 2147483647"):
            queue.set_limit(engine, "k", **values)  # type: ignore[arg-type]
    with pytest.raises(InvalidOption, match="Rate.limit"):
        Rate(2**31, timedelta(minutes=1))
    assert queue.limits(engine) == []
    assert [i.value for i in queue.set_limit(engine, "k", global_concurrency=2**31 - 1)] == [2**31 - 1]
