"""Cost on the pages: the session page's usage table, and the usage overview with its chart."""

from __future__ import annotations

import re
from datetime import UTC, datetime

from agent.types import Usage, UsageRecord
from gateway.store.repository import Store
from tests.gateway.admin_support import XSS, admin_client
from tests.store.helpers import new_session


async def costs(store: Store) -> tuple[str, str]:
    tg = await new_session(store, f"telegram:{XSS}", chat_id="1")
    dc = await new_session(store, "discord:dm:2", platform="discord", chat_id="2")
    for day, sid, cost in ((1, tg, 0.5), (2, tg, 0.25), (2, dc, 2.0), (4, dc, 1.0)):
        at = datetime(2026, 11, day, 12, tzinfo=UTC)
        await store.record_usage(sid, UsageRecord("m", "chat", Usage(100, 50, 100, 800), cost), at=at)
    return tg, dc


async def test_the_session_page_shows_cost_per_day_and_the_cache_hit_ratio(store: Store) -> None:
    tg, _ = await costs(store)
    async with admin_client(store) as client:
        html = (await client.get(f"/sessions/{tg}")).text
    table = html[html.index('<table class="usage">') :]
    table = table[: table.index("</table>")]
    assert "2026-11-01" in table and "2026-11-02" in table and "$0.7500" in table
    assert table.count("80%") == 3  # each day and the total: 800 of 1,000 prompt tokens from the cache
    assert "cache hit ratio 80%" in html


async def test_the_usage_page_has_totals_a_bar_per_day_and_links_the_costliest_sessions(store: Store) -> None:
    tg, dc = await costs(store)
    async with admin_client(store) as client:
        response = await client.get("/usage")
        narrowed = (await client.get("/usage", params={"since": "2026-11-02", "until": "2026-11-02"})).text
        discord = (await client.get("/usage", params={"platform": "discord", "since": ""})).text
    html = response.text
    assert "script-src" not in response.headers["content-security-policy"]
    assert "$3.75" in html and "<script>" not in html
    svg = html[
        html.index('<svg class="usage-chart"') : html.index("</svg>", html.index('<svg class="usage-chart"'))
    ]
    assert svg.count('<rect class="bar"') == 3 and 'class="ratio"' in svg
    sessions = html[html.index("Costliest sessions") :]
    assert sessions.index(f'href="/sessions/{dc}"') < sessions.index(f'href="/sessions/{tg}"')
    assert "&lt;script&gt;" in sessions
    assert narrowed.count('<rect class="bar"') == 1 and "$2.25" in narrowed
    assert discord.count('<rect class="bar"') == 2 and "$3.00" in discord


async def test_the_usage_page_with_no_calls_says_so(store: Store) -> None:
    async with admin_client(store) as client:
        html = (await client.get("/usage")).text
    assert "no usage yet" in html and re.search(r"<b>\$0\.0000</b>cost", html)


async def test_a_single_day_s_chart_still_draws_its_cache_hit_line(store: Store) -> None:
    await costs(store)
    async with admin_client(store) as client:
        html = (await client.get("/usage", params={"since": "2026-11-01", "until": "2026-11-01"})).text
    assert html.count('<rect class="bar"') == 1
    line = re.search(r'<polyline class="ratio" points="([^"]+)"', html)
    assert line is not None
    points = [tuple(float(v) for v in p.split(",")) for p in line.group(1).split()]
    assert len({x for x, _ in points}) >= 2  # a line has length: one point draws nothing
    assert len({y for _, y in points}) == 1  # flat, at that day's ratio
    svg_top, svg_bottom = 14, 200 - 30  # the plot's 100% and 0% (charts_usage TOP, HEIGHT - BOTTOM)
    assert points[0][1] == round(svg_bottom - 0.8 * (svg_bottom - svg_top), 1)  # 80% cache hits
