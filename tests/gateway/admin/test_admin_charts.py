"""The context chart (SVG) and the snippet highlighter, as pure functions."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from agent.types import HIT_END, HIT_START, CompactionRecord, Trigger
from gateway.admin.charts import HEIGHT, WIDTH, context_chart, tokens_label
from gateway.admin.page import highlight
from gateway.store.admin_ops import ContextPoint

T0 = datetime(2026, 1, 1, tzinfo=UTC)
TRIGGERS: list[Trigger] = ["hygiene", "in_loop", "reactive", "manual", "scheduled"]
SVG = "{http://www.w3.org/2000/svg}"


def compaction(
    at: datetime, trigger: Trigger, before: int, after: int, *, undone: bool = False
) -> CompactionRecord:
    return CompactionRecord(
        id=f"c{at.timestamp()}",
        session_id="s",
        trigger=trigger,
        status="ok",
        archived_from_seq=1,
        archived_to_seq=2,
        messages_archived=2,
        summary_message_id=None,
        first_kept_id=None,
        tokens_before=before,
        tokens_after=after,
        model="m",
        duration_ms=1,
        focus=None,
        created_at=at,
        restored_at=at if undone else None,
    )


def calls(*sizes: int) -> list[ContextPoint]:
    return [ContextPoint(T0 + timedelta(minutes=i), n) for i, n in enumerate(sizes)]


def test_each_compaction_is_a_drop_from_before_to_after_labelled_with_its_trigger() -> None:
    svg = ET.fromstring(
        context_chart(
            calls(1000, 5000, 9000, 2000, 6000),
            [compaction(T0 + timedelta(minutes=2, seconds=30), "hygiene", 9000, 1500)],
        )
    )
    [group] = svg.findall(f"{SVG}g")
    assert group.get("data-trigger") == "hygiene"
    line = group.find(f"{SVG}line")
    assert line is not None and line.get("class") == "drop"
    assert line.get("x1") == line.get("x2")
    assert float(line.get("y1", 0)) < float(line.get("y2", 0))  # down the page = fewer tokens
    assert group.findtext(f"{SVG}text") == "hygiene"


def test_the_series_passes_through_the_drop() -> None:
    chart = context_chart(calls(1000, 9000), [compaction(T0 + timedelta(minutes=5), "manual", 9000, 1000)])
    points = re.search(r'<polyline class="series" fill="none" points="([^"]+)"', chart)
    assert points is not None
    xy = [tuple(map(float, p.split(","))) for p in points.group(1).split()]
    assert len(xy) == 4 and xy[2][0] == xy[3][0] and xy[2][1] < xy[3][1]


def test_an_undone_compaction_is_marked() -> None:
    chart = context_chart(calls(100), [compaction(T0, "reactive", 900, 100, undone=True)])
    assert 'class="compaction restored"' in chart and "reactive (undone)" in chart


def test_a_session_without_calls_gets_an_empty_chart() -> None:
    chart = context_chart([], [])
    assert "no API calls yet" in chart and ET.fromstring(chart).tag == f"{SVG}svg"


def test_tokens_labels_are_short() -> None:
    assert [tokens_label(n) for n in (999, 12_345, 2_500_000)] == ["999", "12.3k", "2.5M"]


@given(
    sizes=st.lists(st.integers(0, 2_000_000), max_size=60),
    drops=st.lists(
        st.tuples(
            st.integers(0, 120), st.sampled_from(TRIGGERS), st.integers(0, 2_000_000), st.integers(0, 100)
        ),
        max_size=8,
    ),
)
def test_any_series_gives_valid_svg_with_one_drop_per_compaction_inside_the_box(
    sizes: list[int], drops: list[tuple[int, Trigger, int, int]]
) -> None:
    records = [
        compaction(T0 + timedelta(minutes=m, seconds=i), t, b, a) for i, (m, t, b, a) in enumerate(drops)
    ]
    svg = ET.fromstring(context_chart(calls(*sizes), records))
    lines = [el for el in svg.iter(f"{SVG}line") if el.get("class") == "drop"]
    assert len(lines) == len(records)
    assert sorted(g.get("data-trigger") or "" for g in svg.iter(f"{SVG}g")) == sorted(
        t for _, t, _, _ in drops
    )
    for el in svg.iter():
        for name in ("x", "x1", "x2", "cx"):
            if el.get(name) is not None:
                assert 0 <= float(el.get(name, 0)) <= WIDTH
        for name in ("y", "y1", "y2", "cy"):
            if el.get(name) is not None:
                assert 0 <= float(el.get(name, 0)) <= HEIGHT


def test_highlight_marks_hits_and_escapes_everything_else() -> None:
    snippet = f'say {HIT_START}hello{HIT_END} <b>"x"</b> & [name, 10:23 UTC] {HIT_START}bye{HIT_END}'
    assert highlight(snippet) == (
        "say <mark>hello</mark> &lt;b&gt;&quot;x&quot;&lt;/b&gt; &amp; [name, 10:23 UTC] <mark>bye</mark>"
    )


@given(st.text())
def test_highlight_never_emits_markup_but_mark(snippet: str) -> None:
    out = highlight(snippet)
    assert re.sub(r"</?mark>", "", out).count("<") == 0
    assert out.count("<mark>") == out.count("</mark>")
