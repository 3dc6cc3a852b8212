"""The server-drawn SVG charts: scaled to a round maximum, every text escaped, empty windows drawn."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from venturi_sa.web import charts
from venturi_sa.web.queries import Series, _buckets

NOW = datetime(2026, 12, 1, 12, 0, 30, tzinfo=timezone.utc)


def test_axis_maxima_are_round() -> None:
    assert [charts._nice(v) for v in (0, 0.3, 1, 7, 10, 11, 260, 999)] == [1.0, 0.5, 1, 10, 10, 20, 500, 1000]


def test_buckets_cover_the_window_aligned_to_the_epoch() -> None:
    starts = _buckets(NOW, timedelta(hours=1), 60)
    assert len(starts) == 61 and starts[0] == datetime(2026, 12, 1, 11, 0, tzinfo=timezone.utc)
    assert starts[-1] == datetime(2026, 12, 1, 12, 0, tzinfo=timezone.utc)


def test_bars_stack_and_escape() -> None:
    starts = _buckets(NOW, timedelta(minutes=2), 60)
    series = Series(starts=starts, bucket_seconds=60, values={"completed": [1, 4, 0], "<failed>": [1, 0, 0]})
    svg = str(charts.bars(series, 'runs "per" <minute>'))
    assert svg.startswith("<svg") and svg.endswith("</svg>")
    assert svg.count("<rect ") == 3  # zero values draw nothing
    assert "<minute>" not in svg and "&lt;minute&gt;" in svg and "&lt;failed&gt;" in svg
    assert ">5</text>" in svg  # the axis maximum: the tallest stack (4) rounded up


def test_lines_and_an_empty_window() -> None:
    starts = _buckets(NOW, timedelta(minutes=3), 60)
    one = str(charts.lines(Series(starts=starts, bucket_seconds=60, values={"p50": [0, 0.4, 0, 0]}), "latency"))
    assert "<circle" in one and "<polyline" not in one
    two = str(charts.lines(Series(starts=starts, bucket_seconds=60, values={"p95": [1, 2, 0, 3]}), "latency"))
    assert two.count("<polyline") == 1
    empty = str(charts.bars(Series(starts=starts, bucket_seconds=60, values={"completed": [0, 0, 0, 0]}), "x"))
    assert "<rect" not in empty and "</svg>" in empty
