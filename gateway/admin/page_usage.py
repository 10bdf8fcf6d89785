"""The usage page: what the bot costs, per day, platform and session, and how well the cache works."""

from __future__ import annotations

from gateway.admin.charts_usage import usage_chart
from gateway.admin.page import esc, layout, money, percent
from gateway.admin.page_session import usage_table
from gateway.store.usage_ops import UsageReport


def _card(label: str, value: str) -> str:
    return f'<div class="card"><b>{value}</b>{esc(label)}</div>'


def usage_page(
    days: UsageReport, platforms: UsageReport, sessions: UsageReport, *, params: dict[str, object]
) -> str:
    """``/usage``: totals, the per-day chart, then per platform, per top session and per day."""
    total = days.totals
    cards = (
        '<div class="cards">'
        + _card("cost", money(total.cost_usd))
        + _card("API calls", f"{total.calls:,}")
        + _card("cache hit ratio", percent(total.cache_hit_ratio))
        + _card("uncached input", f"{total.input:,}")
        + _card("cache writes", f"{total.cache_write:,}")
        + _card("cache reads", f"{total.cache_read:,}")
        + _card("output", f"{total.output:,}")
        + "</div>"
    )

    def field(name: str, label: str, kind: str) -> str:
        value = params.get(name)
        return f'<label>{label} <input type="{kind}" name="{name}" value="{esc(value or "")}"></label> '

    form = (
        '<form class="filters" action="/usage" method="get">'
        + field("since", "from day", "date")
        + field("until", "to day", "date")
        + field("platform", "platform", "text")
        + "<button>Show</button></form>"
    )
    return layout(
        "usage",
        "<h1>Cost and usage</h1>"
        + form
        + cards
        + '<p class="muted">Bars: cost per UTC day. Line: cache hit ratio (cache reads over all prompt '
        "tokens; higher is cheaper).</p>"
        + usage_chart(days.rows)
        + "<h2>Per platform</h2>"
        + usage_table(platforms.rows, platforms.totals, first="platform")
        + "<h2>Costliest sessions</h2>"
        + usage_table(sessions.rows, None, first="session", link_sessions=True)
        + "<h2>Per day</h2>"
        + usage_table(days.rows, days.totals, first="day"),
    )
