"""The admin page, rendered on the server: HTML strings, inline CSS and SVG, no script.

Everything that came from a user, a model or the database goes through :func:`esc`
(messages can hold ``<script>``); only markup built here is emitted raw.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from html import escape
from urllib.parse import urlencode

from agent.types import ChatMessage, CompactionRecord, SearchHit, snippet_parts
from gateway.store.admin_ops import MessagePage
from gateway.store.records import SessionInfo, SessionSummary, UsageSummary

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


def layout(title: str, body: str, *, query: str = "") -> str:
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        f"<title>{esc(title)} · Hygieia admin</title><style>{CSS}</style></head><body>"
        '<header><a href="/"><b>Hygieia admin</b></a><a href="/">sessions</a>'
        '<form action="/search" method="get" role="search">'
        f'<input type="search" name="q" value="{esc(query)}" placeholder="search every message">'
        " <button>Search</button></form></header>"
        f"<main>{body}</main></body></html>"
    )


def _link(path: str, **params: object) -> str:
    kept = {k: v for k, v in params.items() if v not in (None, "", False)}
    return path + ("?" + urlencode(kept) if kept else "")


def sessions_page(
    rows: Sequence[SessionSummary], *, platform: str | None, offset: int, limit: int, active_only: bool
) -> str:
    """``/``: the sessions, most recently active first."""
    head = "".join(
        f'<th class="{"n" if n in ("active", "archived", "compactions") else ""}">{n}</th>'
        for n in ("session", "platform", "active", "archived", "compactions", "last activity", "ended")
    )
    body_rows = []
    for r in rows:
        ended = f"{when(r.ended_at)} ({esc(r.end_reason or '')})" if r.ended_at else ""
        body_rows.append(
            f'<tr><td><a href="/sessions/{esc(r.id)}">{esc(r.key)}</a></td><td>{esc(r.platform)}</td>'
            f'<td class="n">{r.active}</td><td class="n">{r.archived}</td><td class="n">{r.compactions}</td>'
            f"<td>{when(r.last_activity_at)}</td><td>{ended}</td></tr>"
        )
    table = f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body_rows)}</tbody></table>"
    if not rows:
        table = '<p class="muted">No sessions.</p>'
    pager = _pager(
        "/",
        offset=offset,
        limit=limit,
        has_more=len(rows) == limit,
        platform=platform,
        active_only=active_only,
    )
    return layout("sessions", f"<h1>Sessions</h1>{table}{pager}")


def _pager(path: str, *, offset: int, limit: int, has_more: bool, **params: object) -> str:
    links = []
    if offset > 0:
        links.append(f'<a href="{esc(_link(path, **params, offset=max(offset - limit, 0)))}">← earlier</a>')
    if has_more:
        links.append(f'<a href="{esc(_link(path, **params, offset=offset + limit))}">later →</a>')
    return f'<nav class="pager">{"".join(links)}</nav>' if links else ""


def session_page(
    info: SessionInfo,
    *,
    counts: tuple[int, int],
    usage: UsageSummary,
    compactions: Sequence[CompactionRecord],
    chart: str,
    page: MessagePage,
    limit: int,
) -> str:
    """``/sessions/{id}``: facts, the context chart, compactions, and the transcript."""
    active, archived = counts
    facts = (
        f'<h1>{esc(info.key)}</h1><p class="muted">session {esc(info.id)} · {esc(info.platform)} · '
        f"model {esc(info.model)} · created {when(info.created_at)} · last activity "
        f"{when(info.last_activity_at)} · {active} active / {archived} archived messages · "
        f"{len(compactions)} compaction(s) · {usage.calls} API calls, "
        f"{usage.input + usage.cache_write + usage.cache_read} prompt / {usage.output} output tokens, "
        f"${usage.cost_usd:.4f}"
        + (f" · ended {when(info.ended_at)} ({esc(info.end_reason or '')})" if info.ended_at else "")
        + "</p>"
    )
    restorable = any(c.restored_at is None for c in compactions)
    restore = (
        f'<form method="post" action="/sessions/{esc(info.id)}/restore">'
        "<button>Undo the latest compaction</button></form>"
        if restorable
        else ""
    )
    pager = _pager(
        f"/sessions/{info.id}",
        offset=page.offset,
        limit=limit,
        has_more=page.offset + len(page.messages) < page.total,
    )
    return layout(
        info.key,
        facts
        + f"<h2>Context size</h2>{chart}"
        + _compactions_table(compactions)
        + restore
        + f'<h2>Transcript</h2><p class="muted">messages {page.offset + 1}–'
        f"{page.offset + len(page.messages)} of {page.total}</p>"
        + pager
        + transcript(page.messages, compactions)
        + pager,
    )


def _compactions_table(compactions: Sequence[CompactionRecord]) -> str:
    if not compactions:
        return ""
    rows = "".join(
        f"<tr><td>{when(c.created_at)}</td><td>{esc(c.trigger)}</td><td>{esc(c.status)}</td>"
        f'<td class="n">{c.messages_archived}</td><td class="n">{c.tokens_before} → {c.tokens_after}</td>'
        f"<td>{esc(c.model)}</td><td>{'undone ' + when(c.restored_at) if c.restored_at else ''}</td></tr>"
        for c in compactions
    )
    head = (
        '<tr><th>when</th><th>trigger</th><th>status</th><th class="n">archived</th>'
        '<th class="n">tokens</th><th>model</th><th>restored</th></tr>'
    )
    return f"<h2>Compactions</h2><table><thead>{head}</thead><tbody>{rows}</tbody></table>"


def transcript(messages: Sequence[ChatMessage], compactions: Sequence[CompactionRecord]) -> str:
    """Active rows as they are; each run of rows out of the active view folded in one ``<details>``."""
    by_id = {c.id: c for c in compactions}
    out: list[str] = []
    run: list[ChatMessage] = []
    for m in messages:
        if run and m.active:
            out.append(_folded(run, by_id))
            run = []
        if m.active:
            out.append(message_html(m))
        else:
            run.append(m)
    if run:
        out.append(_folded(run, by_id))
    return f'<div class="transcript">{"".join(out)}</div>'


def _folded(run: Sequence[ChatMessage], by_id: dict[str, CompactionRecord]) -> str:
    archived = [m for m in run if m.compacted]
    # Several compactions can share a run: a later one archives an earlier one's summary and its tail.
    involved = sorted(
        {c.id: c for m in archived if (c := by_id.get(m.compaction_id or "")) is not None}.values(),
        key=lambda c: c.created_at,
    )
    parts = []
    if archived:
        parts.append(f"{len(archived)} archived message(s)")
    if involved:
        parts.append(", ".join(c.trigger for c in involved) + f" ({when(involved[-1].created_at)})")
    if len(run) > len(archived):
        parts.append(f"{len(run) - len(archived)} retired by an undone compaction")
    label = " · ".join(parts)
    inner = "".join(message_html(m) for m in run)
    return f'<details class="archived"><summary>{esc(label)}</summary>{inner}</details>'


def message_html(m: ChatMessage) -> str:
    text = m.text
    if len(text) > MAX_SHOWN_CHARS:
        text = text[:MAX_SHOWN_CHARS] + f"… ({len(m.text) - MAX_SHOWN_CHARS} more characters)"
    badges = ""
    if m.kind == "summary":
        badges += '<span class="badge summary">summary</span>'
    elif m.kind != "message":
        badges += f'<span class="badge">{esc(m.kind)}</span>'
    if not m.active:
        badges += f'<span class="badge">{"archived" if m.compacted else "retired"}</span>'
    classes = (
        f"msg {m.role}" + (" summary" if m.kind == "summary" else "") + ("" if m.active else " inactive")
    )
    return (
        f'<div class="{classes}" id="m{m.id}"><div class="meta">#{m.id} · {when(m.created_at)} · '
        f"{esc(m.author_name or m.role)}{badges}</div>"
        f'<div class="text">{esc(text)}</div></div>'
    )


def _options(values: Sequence[str], chosen: str) -> str:
    return "".join(f'<option value="{v}"{" selected" if v == chosen else ""}>{v}</option>' for v in values)


def search_page(query: str, state: str, hits: Sequence[SearchHit], *, sort: str = "relevance") -> str:
    """``/search``: ranked (or newest-first) hits with their matches marked."""
    form = (
        '<form action="/search" method="get">'
        f'<input type="search" name="q" value="{esc(query)}" autofocus> '
        f'<select name="state">{_options(("all", "active", "archived"), state)}</select> '
        f'<select name="sort">{_options(("relevance", "recent"), sort)}</select> '
        "<button>Search</button></form>"
    )
    if not query.strip():
        results = '<p class="muted">Words, "phrases", -exclude, prefix*.</p>'
    elif not hits:
        results = '<p class="muted">No matches.</p>'
    else:
        items = "".join(
            f'<li><a href="{esc(_link(f"/sessions/{h.session_id}", message=h.message_id))}#m{h.message_id}">'
            f"#{h.message_id}</a> · {when(h.created_at)} · {esc(h.author_name or h.role)}"
            + ("" if h.active else ' <span class="badge">archived</span>')
            + (' <span class="badge summary">summary</span>' if h.kind == "summary" else "")
            + f'<div class="snippet">{highlight(h.snippet)}</div></li>'
            for h in hits
        )
        results = f'<ol class="hits">{items}</ol>'
    return layout("search", f"<h1>Search</h1>{form}{results}", query=query)
