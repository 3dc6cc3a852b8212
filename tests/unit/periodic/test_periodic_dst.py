"""Fire times and the DST rule: computed in Python, the same in every worker (no database needed)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

from venturi_sa.periodic.policies import CatchUp, parse_catch_up, select
from venturi_sa.periodic.timing import Cron, Every, at_or_after

UTC = timezone.utc
BERLIN = ZoneInfo("Europe/Berlin")
SPRING = datetime(2026, 3, 29, tzinfo=BERLIN)  # 02:00 CET -> 03:00 CEST
FALL = datetime(2026, 10, 25, tzinfo=BERLIN)  # 03:00 CEST -> 02:00 CET


def series(timing: Cron | Every, start: datetime, end: datetime) -> list[datetime]:
    out, t = [], at_or_after(timing, start)
    while t < end:
        out.append(t)
        t = timing.after(t)
    return out


def local(times: list[datetime]) -> list[str]:
    return [t.astimezone(BERLIN).strftime("%m-%d %H:%M%z") for t in times]


def test_daily_0230_fires_once_at_the_first_valid_instant_on_the_spring_forward_day() -> None:
    days = series(Cron("30 2 * * *", BERLIN), SPRING - timedelta(days=1), SPRING + timedelta(days=2))
    assert local(days) == ["03-28 02:30+0100", "03-29 03:00+0200", "03-30 02:30+0200"]
    assert days[1] == datetime(2026, 3, 29, 1, 0, tzinfo=UTC)  # the transition itself


def test_daily_0230_fires_once_in_the_fall_back_fold_at_its_first_occurrence() -> None:
    days = series(Cron("30 2 * * *", BERLIN), FALL - timedelta(days=1), FALL + timedelta(days=2))
    assert local(days) == ["10-24 02:30+0200", "10-25 02:30+0200", "10-26 02:30+0100"]


def test_every_30_minutes_by_cron_keeps_one_fire_per_wall_time_across_both_changes() -> None:
    cron = Cron("*/30 * * * *", BERLIN)
    spring = series(cron, SPRING, SPRING + timedelta(days=1))
    assert len(spring) == 46  # 23-hour day: 02:00 and 02:30 do not exist and collapse into 03:00
    assert "03-29 03:00+0200" in local(spring) and len(set(spring)) == len(spring)
    fall = series(cron, FALL, FALL + timedelta(days=1))
    assert len(fall) == 48  # 25-hour day: 02:00 and 02:30 fire once, in summer time
    assert [x for x in local(fall) if " 02:" in x] == ["10-25 02:00+0200", "10-25 02:30+0200"]


def test_every_30_minutes_by_interval_counts_absolute_time_across_both_changes() -> None:
    every = Every(timedelta(minutes=30))
    spring = series(every, SPRING, SPRING + timedelta(days=1))
    fall = series(every, FALL, FALL + timedelta(days=1))
    # One per 30 real minutes, DST or not: the 23-hour local day has 46, the 25-hour one 50.
    assert len(spring) == 46 and len(fall) == 50
    for day in (spring, fall):
        assert all(b - a == timedelta(minutes=30) for a, b in zip(day, day[1:], strict=False))
    assert "10-25 02:30+0200" in local(fall) and "10-25 02:30+0100" in local(fall)


def test_utc_is_the_default_zone_and_seconds_come_first() -> None:
    cron = Cron("*/20 0 12 * * *", ZoneInfo("UTC"))
    start = datetime(2026, 5, 1, 12, 0, 0, tzinfo=UTC)
    assert series(cron, start, start + timedelta(minutes=1)) == [
        start, start + timedelta(seconds=20), start + timedelta(seconds=40)]


def test_last_fire_at_or_before_in_the_second_pass_of_the_fold() -> None:
    cron = Cron("*/30 * * * *", BERLIN)
    second_pass = datetime(2026, 10, 25, 1, 45, tzinfo=UTC)  # 02:45 CET
    assert cron.at_or_before(second_pass) == datetime(2026, 10, 25, 0, 30, tzinfo=UTC)  # 02:30 CEST


def test_catch_up_latest_fires_one_run_after_a_week_of_downtime() -> None:
    every = Every(timedelta(minutes=5))
    due = datetime(2026, 1, 1, tzinfo=UTC)
    now = due + timedelta(days=7, seconds=30)
    chosen = select(every, CatchUp("latest"), due, now)
    assert chosen.fire == [due + timedelta(days=7)]
    assert chosen.skipped == 7 * 24 * 12
    assert chosen.next_at == due + timedelta(days=7, minutes=5)


def test_catch_up_skip_fires_only_a_fire_time_that_is_on_time() -> None:
    every = Every(timedelta(minutes=5))
    due = datetime(2026, 1, 1, tzinfo=UTC)
    assert select(every, CatchUp("skip"), due, due + timedelta(seconds=3)).fire == [due]
    late = select(every, CatchUp("skip"), due, due + timedelta(hours=1, minutes=2))
    assert late.fire == [] and late.skipped == 13 and late.next_at == due + timedelta(hours=1, minutes=5)


def test_catch_up_all_within_fires_the_window_oldest_first_and_skips_older() -> None:
    every = Every(timedelta(hours=1))
    due = datetime(2026, 1, 1, tzinfo=UTC)
    chosen = select(every, parse_catch_up("all_within(3h)"), due, due + timedelta(hours=10, minutes=1))
    assert chosen.fire == [due + timedelta(hours=h) for h in (8, 9, 10)]
    assert chosen.skipped == 8
    assert chosen.next_at == due + timedelta(hours=11)


def test_nothing_is_due_before_the_next_fire_time() -> None:
    every = Every(timedelta(minutes=1))
    due = datetime(2026, 1, 1, tzinfo=UTC)
    for policy in ("latest", "skip", "all_within(1h)"):
        chosen = select(every, parse_catch_up(policy), due, due - timedelta(seconds=1))
        assert chosen.fire == [] and chosen.skipped == 0 and chosen.next_at == due
