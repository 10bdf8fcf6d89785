"""The cost-per-day chart of the usage page: inline SVG, no script.

Bars are the cost of each day; a line is the cache hit ratio on a 0-100% scale.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from gateway.store.usage_ops import UsageLine

WIDTH, HEIGHT = 760, 200
LEFT, RIGHT, TOP, BOTTOM = 56, 40, 14, 30


def usage_chart(days: Sequence[UsageLine]) -> str:
    """One bar per day (height = cost), the cache hit ratio as a line on the right-hand 0-100% scale."""
    head = (
        f'<svg class="usage-chart" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" '
        f'width="{WIDTH}" height="{HEIGHT}" role="img" aria-label="cost per day and cache hit ratio">'
    )
    if not days:
        return (
            head + f'<text x="{WIDTH // 2}" y="{HEIGHT // 2}" text-anchor="middle">no usage yet</text></svg>'
        )
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    bottom = TOP + plot_h
    top = max(d.cost_usd for d in days) * 1.1 or 1.0
    slot = plot_w / len(days)
    bar_w = max(slot * 0.7, 1.0)
    parts = [
        head,
        f'<line class="axis" x1="{LEFT}" y1="{bottom}" x2="{LEFT + plot_w}" y2="{bottom}"/>',
        f'<text class="tick" x="{LEFT - 4}" y="{TOP + 8}" text-anchor="end">${top:.2f}</text>',
        f'<text class="tick" x="{LEFT - 4}" y="{bottom}" text-anchor="end">$0</text>',
        f'<text class="tick" x="{LEFT + plot_w + 4}" y="{TOP + 8}">100%</text>',
        f'<text class="tick" x="{LEFT + plot_w + 4}" y="{bottom}">0%</text>',
        f'<text class="tick" x="{LEFT}" y="{bottom + 16}">{escape(days[0].key)}</text>',
        f'<text class="tick" x="{LEFT + plot_w}" y="{bottom + 16}" text-anchor="end">'
        f"{escape(days[-1].key)}</text>",
    ]
    points = []
    for i, d in enumerate(days):
        x = LEFT + i * slot + (slot - bar_w) / 2
        h = plot_h * d.cost_usd / top
        tip = (
            f"{d.key}: ${d.cost_usd:.4f}, {d.calls} calls, cache hit {100 * d.cache_hit_ratio:.0f}% "
            f"(input {d.input}, cache writes {d.cache_write}, cache reads {d.cache_read}, output {d.output})"
        )
        parts.append(
            f'<rect class="bar" x="{x:.1f}" y="{bottom - h:.1f}" width="{bar_w:.1f}" height="{h:.1f}">'
            f"<title>{escape(tip)}</title></rect>"
        )
        points.append(f"{LEFT + i * slot + slot / 2:.1f},{bottom - plot_h * d.cache_hit_ratio:.1f}")
    if len(days) == 1:
        # One point draws nothing: a single day's ratio is a level line across its slot.
        y = bottom - plot_h * days[0].cache_hit_ratio
        points = [f"{LEFT:.1f},{y:.1f}", f"{LEFT + slot:.1f},{y:.1f}"]
    parts.append(f'<polyline class="ratio" points="{" ".join(points)}"/>')
    parts.append("</svg>")
    return "".join(parts)
