"""The context-size chart of a session: inline SVG, no script.

X is the order of events (each chat API call one step, so months of quiet and minutes of
tool loops read alike); Y is the prompt size of each call. Each compaction is a vertical
drop from its tokens before to its tokens after, labelled with its trigger; an undone
(restored) compaction is drawn dashed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from html import escape

from agent.types import CompactionRecord
from gateway.store.admin_ops import ContextPoint

WIDTH, HEIGHT = 760, 220
LEFT, RIGHT, TOP, BOTTOM = 56, 16, 14, 30
MAX_MARKERS = 200
"""Above this many calls, points get no marker of their own (the line says enough)."""


@dataclass(frozen=True, slots=True)
class _Event:
    at: datetime
    before: int
    after: int
    compaction: CompactionRecord | None = None


def _events(calls: Sequence[ContextPoint], compactions: Sequence[CompactionRecord]) -> list[_Event]:
    events = [_Event(p.at, p.prompt_tokens, p.prompt_tokens) for p in calls]
    events += [_Event(c.created_at, c.tokens_before, c.tokens_after, c) for c in compactions]
    # A compaction sorts after the calls of the same instant: it acts on what they produced.
    return sorted(events, key=lambda e: (e.at, e.compaction is not None))


def tokens_label(n: int) -> str:
    """12345 -> "12.3k"; 2_500_000 -> "2.5M"."""
    if n >= 1_000_000:
        return f"{n / 1_000_000:.1f}M"
    if n >= 1000:
        return f"{n / 1000:.1f}k"
    return str(n)


def context_chart(calls: Sequence[ContextPoint], compactions: Sequence[CompactionRecord]) -> str:
    """The SVG element (a string) for the session's calls and compactions."""
    events = _events(calls, compactions)
    head = (
        f'<svg class="context-chart" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" '
        f'width="{WIDTH}" height="{HEIGHT}" role="img" aria-label="context size over time">'
    )
    if not events:
        return (
            head
            + f'<text x="{WIDTH // 2}" y="{HEIGHT // 2}" text-anchor="middle">no API calls yet</text></svg>'
        )
    top = max(max(e.before, e.after) for e in events) * 1.1 or 1.0
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    step = plot_w / max(len(events) - 1, 1)

    def y(tokens: int) -> float:
        return TOP + plot_h * (1 - tokens / top)

    parts = [head, *_axes(top, events[0].at, events[-1].at, plot_w, plot_h)]
    points: list[str] = []
    drops: list[str] = []
    markers: list[str] = []
    for i, e in enumerate(events):
        x = LEFT + i * step if len(events) > 1 else LEFT + plot_w / 2
        points.append(f"{x:.1f},{y(e.before):.1f}")
        if e.compaction is None:
            if len(calls) <= MAX_MARKERS:
                markers.append(
                    f'<circle class="call" cx="{x:.1f}" cy="{y(e.before):.1f}" r="2.5">'
                    f"<title>{escape(_when(e.at))}: {e.before} tokens</title></circle>"
                )
            continue
        points.append(f"{x:.1f},{y(e.after):.1f}")
        drops.append(_drop(e.compaction, x, y(e.before), y(e.after), len(drops)))
    parts.append(f'<polyline class="series" fill="none" points="{" ".join(points)}"/>')
    parts += markers + drops
    parts.append("</svg>")
    return "".join(parts)


def _drop(c: CompactionRecord, x: float, y_before: float, y_after: float, index: int) -> str:
    restored = c.restored_at is not None
    label = c.trigger + (" (undone)" if restored else "")
    tip = (
        f"{c.trigger} compaction at {_when(c.created_at)}: {c.tokens_before} -> {c.tokens_after} tokens, "
        f"{c.messages_archived} messages archived" + (" (undone)" if restored else "")
    )
    label_y = max(y_before - 4 - 11 * (index % 3), TOP + 8)  # staggered, so neighbours do not overlap
    return (
        f'<g class="compaction{" restored" if restored else ""}" data-trigger="{escape(c.trigger)}">'
        f"<title>{escape(tip)}</title>"
        f'<line class="drop" x1="{x:.1f}" y1="{y_before:.1f}" x2="{x:.1f}" y2="{y_after:.1f}"/>'
        f'<text class="trigger" x="{x + 3:.1f}" y="{label_y:.1f}">{escape(label)}</text></g>'
    )


def _axes(top: float, first: datetime, last: datetime, plot_w: int, plot_h: int) -> list[str]:
    bottom = TOP + plot_h
    return [
        f'<line class="axis" x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{bottom}"/>',
        f'<line class="axis" x1="{LEFT}" y1="{bottom}" x2="{LEFT + plot_w}" y2="{bottom}"/>',
        f'<text class="tick" x="{LEFT - 4}" y="{TOP + 8}" text-anchor="end">{tokens_label(int(top))}</text>',
        f'<text class="tick" x="{LEFT - 4}" y="{bottom}" text-anchor="end">0</text>',
        f'<text class="tick" x="{LEFT}" y="{bottom + 16}">{escape(_when(first))}</text>',
        f'<text class="tick" x="{LEFT + plot_w}" y="{bottom + 16}" text-anchor="end">'
        f"{escape(_when(last))}</text>",
    ]


def _when(at: datetime) -> str:
    return at.strftime("%Y-%m-%d %H:%M")
