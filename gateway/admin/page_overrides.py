"""The overrides page: the admin-set per-chat overrides (each with its Clear), the config's
entries beside them (read-only), and the form that sets one."""

from __future__ import annotations

from collections.abc import Sequence
from urllib.parse import urlencode

from gateway.admin.overrides import known_models, tools_text
from gateway.admin.page import esc, layout, when
from gateway.admin.page_actions import BY_FIELD
from gateway.config import ChatOverride
from gateway.store.override_ops import AdminOverride


def overrides_url(audit_id: int | None = None) -> str:
    return "/overrides" + (f"?{urlencode({'done': audit_id})}" if audit_id else "")


def _cells(entry: AdminOverride | ChatOverride) -> str:
    prompt = entry.system_prompt or ""
    shown = prompt[:120] + ("…" if len(prompt) > 120 else "")
    return (
        f"<td>{esc(entry.platform)}</td><td>{esc(entry.chat)}</td><td>{esc(entry.thread or '')}</td>"
        f'<td class="prompt">{esc(shown)}</td><td>{esc(entry.model or "")}</td>'
        f"<td>{esc(entry.summary_model or '')}</td>"
        f'<td class="n">{f"{entry.budget_tokens:,}" if entry.budget_tokens else ""}</td>'
        f"<td>{esc(_tools(entry))}</td>"
    )


def _tools(entry: AdminOverride | ChatOverride) -> str:
    if isinstance(entry, ChatOverride):
        return tools_text(entry.tools.model_dump()) if entry.tools is not None else ""
    return tools_text(entry.tools) if entry.tools else ""


HEAD = (
    "<tr><th>platform</th><th>chat</th><th>thread</th><th>system prompt</th><th>model</th>"
    '<th>summary model</th><th class="n">budget</th><th>MCP tools</th>'
)


def _clear_form(entry: AdminOverride) -> str:
    hidden = "".join(
        f'<input type="hidden" name="{name}" value="{esc(value or "")}">'
        for name, value in (("platform", entry.platform), ("chat", entry.chat), ("thread", entry.thread))
    )
    return (
        f'<form class="clear" method="post" action="/overrides/clear">{hidden}'
        '<input type="hidden" name="by" value="admin">'
        '<button name="confirm" value="yes">Clear</button></form>'
    )


def _field(name: str, label: str, kind: str = "text", extra: str = "") -> str:
    return f'<label>{esc(label)} <input type="{kind}" name="{name}"{extra}></label> '


def overrides_page(
    admin: Sequence[AdminOverride], config: Sequence[ChatOverride], *, notice: str = ""
) -> str:
    rows = "".join(
        f'<tr class="override">{_cells(e)}<td>{when(e.updated_at)}</td><td>{esc(e.updated_by)}</td>'
        f"<td>{_clear_form(e)}</td></tr>"
        for e in admin
    )
    mine = (
        f'<table class="admin-overrides"><thead>{HEAD}<th>set (UTC)</th><th>by</th><th></th></tr></thead>'
        f"<tbody>{rows}</tbody></table>"
        if rows
        else '<p class="muted">No admin-set overrides.</p>'
    )
    theirs = (
        f'<table class="config-overrides"><thead>{HEAD}</tr></thead><tbody>'
        + "".join(f"<tr>{_cells(e)}</tr>" for e in config)
        + "</tbody></table>"
        if config
        else '<p class="muted">The config has no <code>overrides:</code>.</p>'
    )
    models = "".join(f'<option value="{esc(m)}">' for m in known_models())
    form = (
        '<form class="set-override" method="post" action="/overrides">'
        "<p>"
        + _field("platform", "platform", extra=' placeholder="telegram" required maxlength="128"')
        + _field("chat", "chat id", extra=' required maxlength="128"')
        + _field("thread", "thread (optional)", extra=' maxlength="128"')
        + "</p><p>"
        + _field("model", "model", extra=' list="models" maxlength="128"')
        + _field("summary_model", "summary model", extra=' list="models" maxlength="128"')
        + _field("budget_tokens", "budget tokens", "number", ' min="1000"')
        + "</p><p>"
        + _field("tools_include", "MCP tools: include (globs, commas)", extra=' maxlength="2000"')
        + _field("tools_exclude", "exclude", extra=' maxlength="2000"')
        + '</p><p><label>system prompt <textarea name="system_prompt" rows="4" cols="80" '
        'maxlength="20000"></textarea></label></p>'
        f'<datalist id="models">{models}</datalist>'
        f"<p>{BY_FIELD}</p>"
        '<p><button name="confirm" value="yes">Set the override</button></p></form>'
    )
    body = (
        "<h1>Per-chat overrides</h1>"
        '<p class="muted">A chat\'s system prompt, model, summary model, token budget and the MCP tools it '
        "is offered (globs over <code>mcp_&lt;server&gt;_&lt;tool&gt;</code>, narrowing what the servers' "
        "<code>allow:</code> rules give). What applies is "
        "resolved when a chat's session starts and kept for that session (the cached prefix holds), so a "
        "change applies from the chat's next session: <code>/new</code>. Most specific first (a thread "
        "beats its chat); at the same level an admin-set entry beats the config's. A setting left empty "
        "comes from the config's entry, then from the service.</p>"
        f"<h2>Set by an admin</h2>{mine}<h2>Set or replace one</h2>{form}"
        f"<h2>From the config</h2>{theirs}"
    )
    return layout("overrides", body, notice=notice)
