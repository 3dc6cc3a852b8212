"""Charts as inline SVG, drawn on the server: no JavaScript, no chart library, no CDN.

:func:`bars` stacks counts per bucket (throughput); :func:`lines` draws one
polyline per series (latency percentiles).  Both return markup safe to put in
a template; every text in it is escaped.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import datetime

from markupsafe import Markup, escape

from venturi_sa.web.queries import Series

WIDTH, HEIGHT = 640, 180
LEFT, RIGHT, TOP, BOTTOM = 44, 8, 10, 22
COLORS = {"completed": "#2f855a", "failed": "#c53030", "p50": "#2b6cb0", "p95": "#b7791f"}


def _nice(top: float) -> float:
    """The smallest 1, 2 or 5 times a power of ten at or above ``top`` (1 for an empty chart)."""
    if top <= 0:
        return 1.0
    magnitude = 10.0 ** math.floor(math.log10(top))
    return next(m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= top)


def _label(value: float) -> str:
    return f"{value:.0f}" if value >= 10 or value == int(value) else f"{value:.2g}"


def _frame(title: str, top: float, starts: Sequence[datetime], unit: str) -> list[str]:
    plot_h = HEIGHT - TOP - BOTTOM
    parts = [f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
             f'aria-label="{escape(title)}" xmlns="http://www.w3.org/2000/svg">',
             f"<title>{escape(title)}</title>"]
    for frac in (0, 0.5, 1):
        y = TOP + plot_h * (1 - frac)
        parts.append(f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y:.1f}" y2="{y:.1f}" class="grid"/>')
        parts.append(f'<text x="{LEFT - 4}" y="{y + 4:.1f}" text-anchor="end">'
                     f"{escape(_label(top * frac))}{escape(unit) if frac == 1 else ''}</text>")
    if starts:
        for i in (0, len(starts) // 2, len(starts) - 1):
            x = LEFT + (WIDTH - LEFT - RIGHT) * (i + 0.5) / len(starts)
            parts.append(f'<text x="{x:.1f}" y="{HEIGHT - 6}" text-anchor="middle">'
                         f"{starts[i]:%H:%M}</text>")
    return parts


def bars(series: Series, title: str, unit: str = "") -> Markup:
    """Stacked bars, one per bucket, in the order of ``series.values``."""
    names = list(series.values)
    n = len(series.starts)
    totals = [sum(series.values[name][i] for name in names) for i in range(n)]
    top = _nice(max(totals, default=0.0))
    parts = _frame(title, top, series.starts, unit)
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    width = plot_w / n if n else plot_w
    for i in range(n):
        base = 0.0
        for name in names:
            value = series.values[name][i]
            if value <= 0:
                continue
            h = plot_h * value / top
            y = TOP + plot_h * (1 - (base + value) / top)
            parts.append(f'<rect x="{LEFT + i * width + 0.5:.1f}" y="{y:.1f}" width="{max(width - 1, 0.5):.1f}" '
                         f'height="{h:.1f}" fill="{COLORS.get(name, "#555")}">'
                         f"<title>{series.starts[i]:%H:%M} {escape(name)}: {value:.0f}</title></rect>")
            base += value
    parts.append("</svg>")
    return Markup("".join(parts))  # noqa: S704 - every interpolated text above is escaped


def lines(series: Series, title: str, unit: str = "s") -> Markup:
    """One polyline per series; buckets with no value (0) are left out of the line."""
    n = len(series.starts)
    top = _nice(max((v for vals in series.values.values() for v in vals), default=0.0))
    parts = _frame(title, top, series.starts, unit)
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    for name, values in series.values.items():
        points = [f"{LEFT + plot_w * (i + 0.5) / n:.1f},{TOP + plot_h * (1 - v / top):.1f}"
                  for i, v in enumerate(values) if v > 0]
        if len(points) == 1:
            x, y = points[0].split(",")
            parts.append(f'<circle cx="{x}" cy="{y}" r="2.5" fill="{COLORS.get(name, "#555")}"/>')
        elif points:
            parts.append(f'<polyline fill="none" stroke-width="1.5" stroke="{COLORS.get(name, "#555")}" '
                         f'points="{" ".join(points)}"><title>{escape(name)}</title></polyline>')
    parts.append("</svg>")
    return Markup("".join(parts))  # noqa: S704 - every interpolated text above is escaped


def legend(names: Sequence[str]) -> Markup:
    """Colour swatches naming the series."""
    items = "".join(f'<span class="swatch" style="background:{COLORS.get(n, "#555")}"></span>{escape(n)} '
                    for n in names)
    return Markup(f'<span class="legend">{items}</span>')  # noqa: S704 - names escaped
