"""The interactive console draws /context as a table instead of the chat platforms' text chart."""

from __future__ import annotations

import io

from rich.console import Console
from rich.table import Table

from gateway.platforms.console.render import parse_context_chart, renderable
from gateway.serving.commands import render_bars

PARTS = [("system", 900), ("memory", 0), ("summary", 1_200), ("history", 30_000), ("tools", 2_000)]


def chart_text() -> str:
    used = sum(t for _, t in PARTS)
    return (
        render_bars([*PARTS, ("free", 200_000 - used)], 200_000)
        + "\nLast prompt as counted by the API: 33,900 tokens."
    )


def test_the_context_chart_reads_back_as_its_rows() -> None:
    chart = parse_context_chart(chart_text())
    assert chart is not None
    assert [(name, tokens) for name, tokens, _ in chart.rows][:5] == PARTS
    assert chart.window == 200_000 and chart.used == 34_100
    assert chart.notes == ["Last prompt as counted by the API: 33,900 tokens."]


def test_the_context_chart_renders_as_a_table_and_other_replies_as_markdown() -> None:
    assert isinstance(renderable(chart_text()), Table)
    out = io.StringIO()
    Console(file=out, width=80).print(renderable(chart_text()))
    assert "history" in out.getvalue() and "30,000" in out.getvalue() and "```" not in out.getvalue()
    assert not isinstance(renderable("```\nprint('code')\n```"), Table)


def _screen(text: str) -> list[str]:
    out = io.StringIO()
    Console(file=out, width=100).print(renderable(text))
    return [line.rstrip() for line in out.getvalue().splitlines()]


def test_single_line_breaks_of_a_reply_stay_line_breaks_on_the_console() -> None:
    lines = _screen("Model: claude-sonnet-5-5\nMessages: 2 active, 0 archived\nCompactions: 0")
    assert lines == ["Model: claude-sonnet-5-5", "Messages: 2 active, 0 archived", "Compactions: 0"]


def test_markdown_still_renders_around_the_kept_line_breaks() -> None:
    lines = _screen("**Usage**\nturns: 3\n\n```\ncode  stays\n```")
    assert lines[:2] == ["Usage", "turns: 3"] and "**" not in "\n".join(lines)
    assert any("code  stays" in line for line in lines)
