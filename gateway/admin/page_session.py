"""The session page: facts, cost, the context chart, compactions, actions and the transcript.

A link from search (``?message=ID#mID``) opens the page that holds the message, marks it,
and opens the folded archive block it sits in, so the hit is read in its context.
"""

from __future__ import annotations

from collections.abc import Sequence

from agent.types import ChatMessage, CompactionRecord
from gateway.admin.page import _pager, esc, layout, money, percent, when
from gateway.store.admin_ops import MessagePage
from gateway.store.cache_ops import CacheMissRow
from gateway.store.engine_ops import SessionStrategyRuns, strategy_overview
from gateway.store.records import SessionInfo
from gateway.store.usage_ops import UsageLine, UsageReport

MAX_SHOWN_CHARS = 20_000
"""A message longer than this is cut on the page (the API gives it whole)."""


def session_page(
    info: SessionInfo,
    *,
    counts: tuple[int, int],
    usage: UsageReport,
    compactions: Sequence[CompactionRecord],
    chart: str,
    runs: Sequence[SessionStrategyRuns] = (),
    tools: str = "",
    refusals: dict[str, int] | None = None,
    misses: Sequence[CacheMissRow] = (),
    page: MessagePage,
    limit: int,
    target: int | None = None,
    notice: str = "",
) -> str:
    """``/sessions/{id}``: facts, cost, the context chart, compactions, tool calls (``tools``: their
    table), actions and the transcript."""
    active, archived = counts
    total = usage.totals
    facts = (
        f'<h1>{esc(info.key)}</h1><p class="muted">session {esc(info.id)} · {esc(info.platform)} · '
        f"chat {esc(info.chat_id)} · model {esc(info.model)} · created {when(info.created_at)} · "
        f"last activity {when(info.last_activity_at)} · {active} active / {archived} archived messages · "
        f"{len(compactions)} compaction(s) · {total.calls} API calls, {money(total.cost_usd)}, "
        f"cache hit ratio {percent(total.cache_hit_ratio)}"
        + (f" · ended {when(info.ended_at)} ({esc(info.end_reason or '')})" if info.ended_at else "")
        + _refusals(refusals or {})
        + "</p>"
        + cache_line(total, misses)
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
        + actions(info, compactions)
        + f"<h2>Context size</h2>{chart}"
        + "<h2>Cost and usage</h2>"
        + usage_table(usage.rows, total, first="day")
        + _compactions_table(compactions, runs)
        + tools
        + f'<h2>Transcript</h2><p class="muted">messages {page.offset + 1}–'
        f"{page.offset + len(page.messages)} of {page.total}</p>"
        + pager
        + transcript(page.messages, compactions, target=target)
        + pager,
        notice=notice,
    )


def cache_line(total: UsageLine, misses: Sequence[CacheMissRow]) -> str:
    """The session's cache read share and its latest cache misses, each with our part in it
    (an expected miss of ours, or waste)."""
    shown = "".join(
        f"<li>{when(m.at)} <b>{esc(m.reason)}</b> · cause {esc(m.cause)} · "
        f"{'ours (expected)' if m.ours else 'not ours (waste)'}"
        + (f" · {m.missed_tokens:,} tokens missed" if m.missed_tokens is not None else "")
        + "</li>"
        for m in misses
    )
    last = f'<ul class="misses">{shown}</ul>' if misses else ""
    return (
        f'<p class="cache">Cache read share {percent(total.cache_hit_ratio)} '
        f"({total.cache_read:,} of {total.prompt:,} prompt tokens read from cache). "
        f"{'Last cache misses:' if misses else 'No cache miss recorded.'}</p>{last}"
    )


def _refusals(refusals: dict[str, int]) -> str:
    """The replies the model declined, by category ("" when it declined none)."""
    if not refusals:
        return ""
    by = ", ".join(f"{esc(category)} {n}" for category, n in sorted(refusals.items()))
    return f" · {sum(refusals.values())} refusal(s) ({by})"


def actions(info: SessionInfo, compactions: Sequence[CompactionRecord]) -> str:
    """Links to each action's confirmation page, and the exports."""
    base = f"/sessions/{esc(info.id)}"
    links = [f'<a class="action" href="{base}/compact">Compact now…</a>']
    if any(c.restored_at is None for c in compactions):
        links.append(f'<a class="action" href="{base}/restore">Undo the latest compaction…</a>')
    if not info.ended:
        links.append(f'<a class="action" href="{base}/end">End this session…</a>')
    links.append(f'<a href="{base}/export?format=md">Export Markdown</a>')
    links.append(f'<a href="{base}/export?format=jsonl">Export JSONL</a>')
    return f'<nav class="actions">{" · ".join(links)}</nav>'


def usage_table(
    rows: Sequence[UsageLine], total: UsageLine | None, *, first: str, link_sessions: bool = False
) -> str:
    """Uncached input, cache writes, cache reads, output, cost and the hit ratio, a row per group."""
    if not rows:
        return '<p class="muted">No API calls yet.</p>'
    head = (
        f"<tr><th>{esc(first)}</th>"
        + "".join(
            f'<th class="n">{n}</th>'
            for n in ("calls", "input", "cache writes", "cache reads", "output", "cost", "cache read share")
        )
        + "</tr>"
    )

    def row(line: UsageLine, name: str) -> str:
        return (
            f'<tr><td>{name}</td><td class="n">{line.calls:,}</td><td class="n">{line.input:,}</td>'
            f'<td class="n">{line.cache_write:,}</td><td class="n">{line.cache_read:,}</td>'
            f'<td class="n">{line.output:,}</td><td class="n">{money(line.cost_usd)}</td>'
            f'<td class="n">{percent(line.cache_hit_ratio)}</td></tr>'
        )

    def name(line: UsageLine) -> str:
        text = esc(line.label or line.key)
        return f'<a href="/sessions/{esc(line.key)}">{text}</a>' if link_sessions else text

    body = "".join(row(r, name(r)) for r in rows)
    foot = f"<tfoot>{row(total, '<b>total</b>')}</tfoot>" if total is not None and len(rows) > 1 else ""
    return f'<table class="usage"><thead>{head}</thead><tbody>{body}</tbody>{foot}</table>'


def _compactions_table(
    compactions: Sequence[CompactionRecord], runs: Sequence[SessionStrategyRuns] = ()
) -> str:
    if not compactions and not runs:
        return ""
    rows = "".join(
        f"<tr><td>{when(c.created_at)}</td><td>{esc(c.trigger)}</td><td>{esc(c.strategy)}</td>"
        f"<td>{esc(c.status)}</td>"
        f'<td class="n">{c.messages_archived}</td><td class="n">{c.tokens_before} → {c.tokens_after}</td>'
        f'<td class="n">{c.tokens_freed}</td>'
        f"<td>{esc(c.model)}</td><td>{'undone ' + when(c.restored_at) if c.restored_at else ''}</td></tr>"
        for c in compactions
    )
    head = (
        '<tr><th>when</th><th>trigger</th><th>strategy</th><th>status</th><th class="n">archived</th>'
        '<th class="n">tokens</th><th class="n">freed</th><th>model</th><th>restored</th></tr>'
    )
    overview = strategy_overview(compactions, runs)
    by_strategy = ""
    if overview is not None:
        freed = ", ".join(f"{esc(name)} {n:,} tokens ({k}×)" for name, k, n in overview.totals)
        by_strategy = (
            f'<p class="strategies">Last strategy: <b>{esc(overview.last)}</b> '
            f"(freed {overview.last_freed:,} tokens). Freed by strategy: {freed}.</p>"
        )
    table = f"<table><thead>{head}</thead><tbody>{rows}</tbody></table>" if compactions else ""
    return f"<h2>Compactions</h2>{by_strategy}{table}"


def transcript(
    messages: Sequence[ChatMessage], compactions: Sequence[CompactionRecord], *, target: int | None = None
) -> str:
    """Active rows as they are; each run of rows out of the active view folded in one ``<details>``
    (open when it holds ``target``)."""
    by_id = {c.id: c for c in compactions}
    out: list[str] = []
    run: list[ChatMessage] = []
    for m in messages:
        if run and m.active:
            out.append(_folded(run, by_id, target))
            run = []
        if m.active:
            out.append(message_html(m, target=target))
        else:
            run.append(m)
    if run:
        out.append(_folded(run, by_id, target))
    return f'<div class="transcript">{"".join(out)}</div>'


def _folded(run: Sequence[ChatMessage], by_id: dict[str, CompactionRecord], target: int | None) -> str:
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
    inner = "".join(message_html(m, target=target) for m in run)
    opened = " open" if target is not None and any(m.id == target for m in run) else ""
    return f'<details class="archived"{opened}><summary>{esc(label)}</summary>{inner}</details>'


def message_html(m: ChatMessage, *, target: int | None = None) -> str:
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
        f"msg {m.role}"
        + (" summary" if m.kind == "summary" else "")
        + ("" if m.active else " inactive")
        + (" target" if target is not None and m.id == target else "")
    )
    return (
        f'<div class="{classes}" id="m{m.id}"><div class="meta">#{m.id} · {when(m.created_at)} · '
        f"{esc(m.author_name or m.role)}{badges}</div>"
        f'<div class="text">{esc(text)}</div></div>'
    )
