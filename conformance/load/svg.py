"""The latency-over-time picture: one line per route, the p95 of each time slot on a log
scale, drawn as inline SVG (no plotting library, so the HTML report needs no dependency)."""

from __future__ import annotations

import html
import math
from collections import Counter

from conformance.judge.tally import Tally, percentile

WIDTH, HEIGHT = 960, 380
LEFT, RIGHT, TOP, BOTTOM = 60, 230, 20, 40
#: At most this many points per line (slots of several seconds on a long run).
MAX_POINTS = 240
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
           "#7f7f7f", "#bcbd22", "#17becf", "#393b79", "#637939", "#8c6d31", "#843c39")


def _series(tally: Tally) -> tuple[dict[str, list[tuple[float, int]]], float]:
    """Per route, (seconds since the first slot, p95 ms) points; and the run's span in s."""
    seconds = sorted({int(b) for buckets in tally.timeline.values() for b in buckets})
    if not seconds:
        return {}, 0.0
    start, span = seconds[0], seconds[-1] - seconds[0] + 1
    slot = max(1, math.ceil(span / MAX_POINTS))
    out: dict[str, list[tuple[float, int]]] = {}
    for key in sorted(tally.timeline, key=lambda k: -tally.exchanges[k]):
        slots: dict[int, Counter[int]] = {}
        for bucket, hist in tally.timeline[key].items():
            at = (int(bucket) - start) // slot
            slots.setdefault(at, Counter()).update({int(ms): n for ms, n in hist.items()})
        out[key] = [(at * slot + slot / 2, max(1, percentile(h, 0.95)))
                    for at, h in sorted(slots.items())]
    return out, float(span)


def _y(ms: float, top_ms: float) -> float:
    """Log scale from 1 ms (bottom) to ``top_ms`` (top)."""
    frac = math.log10(max(ms, 1.0)) / max(math.log10(top_ms), 1e-9)
    return TOP + (HEIGHT - TOP - BOTTOM) * (1.0 - frac)


def _x(second: float, span: float) -> float:
    return LEFT + (WIDTH - LEFT - RIGHT) * (second / max(span, 1.0))


def _axes(span: float, top_ms: float) -> list[str]:
    parts = [f'<line x1="{LEFT}" y1="{HEIGHT - BOTTOM}" x2="{WIDTH - RIGHT}" '
             f'y2="{HEIGHT - BOTTOM}" stroke="#333"/>',
             f'<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{HEIGHT - BOTTOM}" stroke="#333"/>']
    decade = 1.0
    while decade <= top_ms:
        y = _y(decade, top_ms)
        parts.append(f'<line x1="{LEFT}" y1="{y:.1f}" x2="{WIDTH - RIGHT}" y2="{y:.1f}" '
                     'stroke="#ddd"/>')
        parts.append(f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{decade:g} ms</text>')
        decade *= 10
    for i in range(6):
        second = span * i / 5
        x = _x(second, span)
        parts.append(f'<text x="{x:.1f}" y="{HEIGHT - BOTTOM + 16}" text-anchor="middle">'
                     f'{second:.0f} s</text>')
    return parts


def latency_svg(tally: Tally) -> str:
    """The picture, or a line saying there is nothing to draw."""
    series, span = _series(tally)
    if not series:
        return "<p>no calls to draw</p>"
    top_ms = 10 ** math.ceil(math.log10(max(ms for pts in series.values() for _, ms in pts) + 1))
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
             'font-size="11" font-family="sans-serif" role="img" '
             'aria-label="p95 latency over time per route">', *_axes(span, top_ms)]
    for i, (key, points) in enumerate(series.items()):
        colour = PALETTE[i % len(PALETTE)]
        path = " ".join(f"{_x(s, span):.1f},{_y(ms, top_ms):.1f}" for s, ms in points)
        parts.append(f'<polyline fill="none" stroke="{colour}" stroke-width="1.5" points="{path}">'
                     f"<title>{html.escape(key)}</title></polyline>")
        y = TOP + 14 * i + 6
        parts.append(f'<rect x="{WIDTH - RIGHT + 12}" y="{y - 8}" width="10" height="10" '
                     f'fill="{colour}"/><text x="{WIDTH - RIGHT + 28}" y="{y + 1}">'
                     f"{html.escape(key)}</text>")
    parts.append("</svg>")
    return "".join(parts)
