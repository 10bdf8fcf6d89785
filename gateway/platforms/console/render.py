"""How a reply looks on the interactive console: Markdown, and ``/context`` as a small table.

A reply's single line breaks are line breaks, as in the chat apps (``/help``, ``/status`` are
one item a line); plain Markdown would fold them into one paragraph.

``/context`` answers every platform with the same text bar chart (a code block, so chat apps
keep its columns). A terminal can do better: the chart's rows are read back and drawn as a
Rich table with a short bar per part.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rich.console import RenderableType
from rich.markdown import Markdown
from rich.table import Table

# "Context: 1,262 tokens (0.6%) of the 200,000-token budget (window 1,000,000)"
_HEADER = re.compile(r"^Context: ([\d,]+) tokens \([\d.]+%\) of (?:the )?([\d,]+)[- ]token")
_ROW = re.compile(r"^(\w+(?: \w+)?)\s+[█░]+\s+([\d,]+)\s+([\d.]+)%$")
BAR = 12


class ChatMarkdown(Markdown):
    """Rich's Markdown, with each newline inside a paragraph kept as a line break."""

    def __init__(self, markup: str) -> None:
        super().__init__(markup)
        for block in self.parsed:
            for token in block.children or ():
                if token.type == "softbreak":
                    token.type = "hardbreak"


@dataclass(frozen=True, slots=True)
class ContextChart:
    used: int
    window: int  # the room the shares are of: the effective budget
    rows: list[tuple[str, int, float]]  # (part, tokens, percent)
    notes: list[str]
    title: str = ""


def parse_context_chart(text: str) -> ContextChart | None:
    """The rows of a ``/context`` chart, or None when ``text`` is not one."""
    body = text.strip()
    if not body.startswith("```\nContext: "):
        return None
    fenced, _, after = body[4:].partition("\n```")
    lines = fenced.splitlines()
    header = _HEADER.match(lines[0]) if lines else None
    if header is None:
        return None
    rows: list[tuple[str, int, float]] = []
    for line in lines[1:]:
        row = _ROW.match(line.strip())
        if row is None:
            return None
        rows.append((row.group(1), int(row.group(2).replace(",", "")), float(row.group(3))))
    notes = [line for line in after.strip().splitlines() if line.strip()]
    return ContextChart(
        int(header.group(1).replace(",", "")), int(header.group(2).replace(",", "")), rows, notes, lines[0]
    )


def context_table(chart: ContextChart) -> Table:
    share = 100 * chart.used / chart.window if chart.window else 0.0
    table = Table(
        title=chart.title or f"Context: {chart.used:,} tokens ({share:.1f}%) of {chart.window:,} tokens",
        caption="\n".join(chart.notes) or None,
        title_justify="left",
        caption_justify="left",
    )
    table.add_column("part")
    table.add_column("tokens", justify="right")
    table.add_column("share", justify="right")
    table.add_column("", no_wrap=True)
    for part, tokens, percent in chart.rows:
        filled = min(BAR, round(percent * BAR / 100)) or (1 if tokens else 0)
        style = "dim" if part == "free" else "cyan"
        table.add_row(part, f"{tokens:,}", f"{percent:.1f}%", f"[{style}]{'█' * filled}[/{style}]")
    return table


def renderable(text: str) -> RenderableType:
    """What the console prints for a reply."""
    chart = parse_context_chart(text)
    return context_table(chart) if chart is not None else ChatMarkdown(text)
