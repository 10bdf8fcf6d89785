"""The admin page, rendered on the server: HTML strings, inline CSS and SVG, no script.

Everything that came from a user, a model or the database goes through :func:`esc`
(messages can hold ``<script>``); only markup built here is emitted raw.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from html import escape
from urllib.parse import urlencode

from agent.types import SearchHit, snippet_parts
from gateway.admin.charts import tokens_label
from gateway.store.find_ops import SORTS as SESSION_SORTS
from gateway.store.find_ops import SessionLabel, SessionListing

MAX_SHOWN_CHARS = 20_000
"""A message longer than this is cut on the page (the API gives it whole)."""

CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:0 auto;max-width:1100px;padding:0 16px 48px;color:#1d1d1f}
a{color:#0b57d0;text-decoration:none}a:hover{text-decoration:underline}
header{display:flex;gap:16px;align-items:center;border-bottom:1px solid #ddd;padding:10px 0;margin:0 0 12px}
header form{margin-left:auto}input[type=search]{width:280px;padding:4px 6px}
table{border-collapse:collapse;width:100%}th,td{text-align:left;padding:4px 8px;border-bottom:1px solid #eee}
td.n,th.n{text-align:right}.muted{color:#777}.pager{margin:10px 0;display:flex;gap:12px}
.msg{border-left:3px solid #ccc;padding:4px 10px;margin:8px 0}.msg.user{border-color:#0b57d0}
.msg.assistant{border-color:#2e7d32}.msg.summary{background:#fff8e1;border-color:#f9a825}
.msg .meta{font-size:12px;color:#666}.msg .text{white-space:pre-wrap;word-break:break-word}
.badge{display:inline-block;font-size:11px;padding:0 6px;border-radius:8px;background:#eee;margin-left:4px}
.badge.summary{background:#f9a825;color:#000}details.archived{margin:8px 0;color:#888}
details.archived>summary{cursor:pointer;color:#777}details.archived .msg{opacity:.7;border-color:#ddd}
mark{background:#ffeb3b}.context-chart{max-width:100%;height:auto;background:#fafafa;border:1px solid #eee}
.context-chart .series{stroke:#0b57d0;stroke-width:1.5}.context-chart .call{fill:#0b57d0}
.context-chart .drop{stroke:#d32f2f;stroke-width:2}.context-chart .restored .drop{stroke-dasharray:4 3}
.context-chart .trigger{fill:#d32f2f;font-size:11px}.context-chart .axis{stroke:#999}
.context-chart .tick{fill:#777;font-size:10px}
form.filters{margin:8px 0 12px;display:flex;flex-wrap:wrap;gap:6px 10px;align-items:center}
form.filters input[type=text]{width:120px}
.notice{background:#e8f5e9;border:1px solid #a5d6a7;padding:6px 10px}
.error{background:#ffebee;border:1px solid #ef9a9a;padding:6px 10px}.msg.target{outline:2px solid #f9a825}
.actions{display:flex;gap:8px;flex-wrap:wrap;margin:10px 0}.actions form{margin:0}
button.danger{background:#d32f2f;color:#fff;border:1px solid #b71c1c;padding:3px 10px}
.hits .key{font-weight:600}.cards{display:flex;gap:12px;flex-wrap:wrap}
.card{border:1px solid #ddd;border-radius:6px;padding:8px 12px;min-width:120px}
.card b{display:block;font-size:18px}
.usage-chart{max-width:100%;height:auto;background:#fafafa;border:1px solid #eee}
.usage-chart .bar{fill:#0b57d0}.usage-chart .ratio{stroke:#2e7d32;stroke-width:1.5;fill:none}
.usage-chart .tick{fill:#777;font-size:10px}.usage-chart .axis{stroke:#999}
"""


def esc(value: object) -> str:
    """HTML-escaped text (quotes too: it may land in an attribute)."""
    return escape(str(value), quote=True)


def highlight(snippet: str) -> str:
    """A search snippet with the store's match markers as ``<mark>``, everything else escaped."""
    return "".join(
        f"<mark>{esc(text)}</mark>" if match else esc(text) for text, match in snippet_parts(snippet)
    )


def when(value: datetime | None) -> str:
    return "-" if value is None else value.strftime("%Y-%m-%d %H:%M")


def layout(title: str, body: str, *, query: str = "", notice: str = "") -> str:
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        f"<title>{esc(title)} · Hygieia admin</title><style>{CSS}</style></head><body>"
        '<header><a href="/"><b>Hygieia admin</b></a><a href="/">sessions</a><a href="/search">search</a>'
        '<a href="/usage">usage</a><a href="/audit">audit</a><a href="/overrides">overrides</a>'
        '<a href="/erase">erase a user</a>'
        '<form action="/search" method="get" role="search">'
        f'<input type="search" name="q" value="{esc(query)}" placeholder="search every message">'
        " <button>Search</button></form></header>"
        + (f'<p class="notice" role="status">{esc(notice)}</p>' if notice else "")
        + f"<main>{body}</main></body></html>"
    )


def _link(path: str, **params: object) -> str:
    kept = {k: v for k, v in params.items() if v not in (None, "", False)}
    return path + ("?" + urlencode(kept) if kept else "")


def _sort_header(name: str, label: str, params: dict[str, object], sort: str, order: str) -> str:
    """A column title that sorts by it (again: the other way)."""
    flip = "asc" if sort == name and order == "desc" else "desc"
    arrow = (" ↓" if order == "desc" else " ↑") if sort == name else ""
    href = _link("/", **{**params, "sort": name, "order": flip, "offset": None})
    return f'<a href="{esc(href)}">{esc(label)}{arrow}</a>'


def sessions_form(params: dict[str, object], sort: str, order: str) -> str:
    """The filters of the sessions list (a GET form: the URL is the state, no script)."""

    def field(name: str, label: str, kind: str = "text") -> str:
        value = params.get(name)
        return (
            f'<label>{esc(label)} <input type="{kind}" name="{name}" '
            f'value="{esc("" if value is None else value)}"></label> '
        )

    sorts = "".join(
        f'<option value="{s}"{" selected" if s == sort else ""}>{s}</option>' for s in SESSION_SORTS
    )
    orders = "".join(
        f'<option value="{o}"{" selected" if o == order else ""}>{o}</option>' for o in ("desc", "asc")
    )
    checked = " checked" if params.get("active_only") else ""
    return (
        '<form class="filters" action="/" method="get">'
        + field("platform", "platform")
        + field("chat", "chat id")
        + field("user", "user id")
        + field("key", "key contains")
        + field("since", "active since (UTC)", "datetime-local")
        + f'<label><input type="checkbox" name="active_only" value="true"{checked}> current only</label> '
        + f'<label>sort <select name="sort">{sorts}</select></label> '
        + f'<select name="order">{orders}</select> <button>Filter</button></form>'
    )


def sessions_page(
    rows: Sequence[SessionListing],
    *,
    total: int,
    params: dict[str, object],
    sort: str,
    order: str,
    offset: int,
    limit: int,
    notice: str = "",
) -> str:
    """``/``: the sessions, filtered and sorted, a page at a time."""
    heads = [
        _sort_header("activity", "last activity", params, sort, order),
        _sort_header("size", "context", params, sort, order),
        _sort_header("cost", "cost", params, sort, order),
        _sort_header("compactions", "compactions", params, sort, order),
    ]
    head = (
        "<th>session</th><th>platform</th><th>chat</th>"
        f'<th class="n">active</th><th class="n">archived</th><th class="n">{heads[1]}</th>'
        f'<th class="n">{heads[2]}</th><th class="n">{heads[3]}</th><th>{heads[0]}</th><th>ended</th>'
    )
    body_rows = []
    for r in rows:
        ended = f"{when(r.ended_at)} ({esc(r.end_reason or '')})" if r.ended_at else ""
        size = tokens_label(r.last_prompt_tokens) if r.last_prompt_tokens is not None else "-"
        body_rows.append(
            f'<tr><td><a href="/sessions/{esc(r.id)}">{esc(r.key)}</a></td><td>{esc(r.platform)}</td>'
            f'<td>{esc(r.chat_id)}</td><td class="n">{r.active}</td><td class="n">{r.archived}</td>'
            f'<td class="n">{size}</td><td class="n">{money(r.cost_usd)}</td>'
            f'<td class="n">{r.compactions}</td><td>{when(r.last_activity_at)}</td><td>{ended}</td></tr>'
        )
    table = (
        f'<table class="sessions"><thead><tr>{head}</tr></thead><tbody>{"".join(body_rows)}</tbody></table>'
    )
    if not rows:
        table = '<p class="muted">No sessions.</p>'
    shown = f"{offset + 1}–{offset + len(rows)} of {total}" if rows else f"0 of {total}"
    pager = _pager(
        "/", offset=offset, limit=limit, has_more=offset + len(rows) < total, **params, sort=sort, order=order
    )
    return layout(
        "sessions",
        f'<h1>Sessions</h1>{sessions_form(params, sort, order)}<p class="muted">{shown}</p>{table}{pager}',
        notice=notice,
    )


def money(usd: float) -> str:
    return f"${usd:,.2f}" if usd >= 1 else f"${usd:.4f}"


def percent(ratio: float) -> str:
    return f"{100 * ratio:.0f}%"


def _pager(path: str, *, offset: int, limit: int, has_more: bool, **params: object) -> str:
    links = []
    if offset > 0:
        links.append(f'<a href="{esc(_link(path, **params, offset=max(offset - limit, 0)))}">← earlier</a>')
    if has_more:
        links.append(f'<a href="{esc(_link(path, **params, offset=offset + limit))}">later →</a>')
    return f'<nav class="pager">{"".join(links)}</nav>' if links else ""


def search_form(query: str, params: dict[str, object], sorts: Sequence[str]) -> str:
    """Every filter /api/search has, as a GET form."""

    def field(name: str, label: str, kind: str = "text") -> str:
        value = params.get(name)
        return (
            f'<label>{esc(label)} <input type="{kind}" name="{name}" '
            f'value="{esc("" if value is None else value)}"></label> '
        )

    def select(name: str, options: Sequence[str]) -> str:
        chosen = params.get(name)
        items = "".join(
            f'<option value="{o}"{" selected" if o == chosen else ""}>{o}</option>' for o in options
        )
        return f'<label>{name} <select name="{name}">{items}</select></label> '

    return (
        '<form class="filters" action="/search" method="get">'
        f'<input type="search" name="q" value="{esc(query)}" autofocus> '
        + select("state", ("all", "active", "archived"))
        + select("sort", sorts)
        + " <button>Search</button><br>"
        + field("platform", "platform")
        + field("chat", "chat id")
        + field("session", "session id")
        + field("user", "user id")
        + field("since", "since (UTC)", "datetime-local")
        + field("until", "until (UTC)", "datetime-local")
        + "</form>"
    )


def search_page(
    query: str,
    hits: Sequence[SearchHit],
    labels: Mapping[str, SessionLabel],
    *,
    params: dict[str, object],
    sorts: Sequence[str],
    offset: int,
    limit: int,
    has_more: bool,
) -> str:
    """``/search``: hits with their session's key and platform, each linked to its place in the transcript."""
    form = search_form(query, params, sorts)
    if not query.strip():
        results = '<p class="muted">Words, "phrases", -exclude, prefix*.</p>'
    elif not hits:
        results = '<p class="muted">No matches.</p>'
    else:
        items = "".join(_hit_html(h, labels.get(h.session_id)) for h in hits)
        results = f'<ol class="hits" start="{offset + 1}">{items}</ol>'
    pager = _pager("/search", offset=offset, limit=limit, has_more=has_more, q=query, **params)
    return layout("search", f"<h1>Search</h1>{form}{results}{pager}", query=query)


def _hit_html(h: SearchHit, label: SessionLabel | None) -> str:
    href = _link(f"/sessions/{h.session_id}", message=h.message_id) + f"#m{h.message_id}"
    where = (
        f'<span class="key">{esc(label.key)}</span> <span class="badge">{esc(label.platform)}</span>'
        if label
        else esc(h.session_id)
    )
    return (
        f'<li class="hit"><a href="{esc(href)}">{where} · #{h.message_id}</a> · {when(h.created_at)} · '
        f"{esc(h.author_name or h.role)}"
        + ("" if h.active else ' <span class="badge">archived</span>')
        + (' <span class="badge summary">summary</span>' if h.kind == "summary" else "")
        + f'<div class="snippet">{highlight(h.snippet)}</div></li>'
    )
