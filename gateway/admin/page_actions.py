"""Confirmation pages of the admin actions, the erase form, and the audit view."""

from __future__ import annotations

from collections.abc import Sequence
from urllib.parse import urlencode

from agent.types import CompactionRecord
from gateway.admin.page import _pager, esc, layout, when
from gateway.store.audit_ops import AuditEntry
from gateway.store.erase_ops import EraseCounts
from gateway.store.records import SessionInfo

BY_FIELD = (
    '<label>your name (for the audit trail) <input type="text" name="by" value="admin" '
    'maxlength="128"></label>'
)


def session_url(session_id: str, audit_id: int | None = None) -> str:
    """The session page; with ``audit_id`` it shows what that action did (the URL carries no text)."""
    return f"/sessions/{session_id}" + (f"?{urlencode({'done': audit_id})}" if audit_id else "")


def audit_url(audit_id: int | None = None) -> str:
    return "/audit" + (f"?{urlencode({'done': audit_id})}" if audit_id else "")


def _confirm(
    title: str, action: str, what: str, cancel: str, fields: str = "", *, danger: bool = False
) -> str:
    button = ' class="danger"' if danger else ""
    return layout(
        title,
        f"<h1>{esc(title)}</h1>{what}"
        f'<form class="confirm" method="post" action="{esc(action)}">{fields}<p>{BY_FIELD}</p>'
        f'<p><button{button} name="confirm" value="yes">Confirm: {esc(title.lower())}</button> '
        f'<a href="{esc(cancel)}">cancel</a></p></form>',
    )


def confirm_compact(info: SessionInfo, active: int, *, available: bool) -> str:
    what = (
        f"<p>Session <b>{esc(info.key)}</b> has {active} active messages. Compacting summarizes the older "
        "part now (trigger <i>manual</i>, as <code>/compact</code> in the chat); the summarized messages are "
        "archived, not deleted, and the compaction can be undone.</p>"
    )
    if not available:
        what += '<p class="error">This admin server has no model configured, so it cannot compact.</p>'
    focus = (
        '<p><label>focus (optional) <input type="text" name="focus" maxlength="2000" '
        'placeholder="e.g. the budget decisions"></label></p>'
    )
    return _confirm("Compact now", f"/sessions/{info.id}/compact", what, session_url(info.id), focus)


def confirm_restore(info: SessionInfo, latest: CompactionRecord | None) -> str:
    if latest is None:
        what = f"<p>{esc(info.key)} has no compaction to undo.</p>"
        return layout("Undo the latest compaction", f"<h1>Nothing to undo</h1>{what}")
    what = (
        f"<p>Session <b>{esc(info.key)}</b>: the {esc(latest.trigger)} compaction of "
        f"{when(latest.created_at)} archived {latest.messages_archived} messages. Undoing it makes them "
        "active again and retires its summary (nothing is deleted).</p>"
    )
    return _confirm("Undo the latest compaction", f"/sessions/{info.id}/restore", what, session_url(info.id))


def confirm_end(info: SessionInfo) -> str:
    if info.ended:
        return layout(
            "End the session", f"<h1>Already ended</h1><p>{esc(info.key)} ended {when(info.ended_at)}.</p>"
        )
    what = (
        f"<p>End <b>{esc(info.key)}</b>? Its messages stay and remain searchable; the chat's next message "
        "starts a new session with an empty history.</p>"
    )
    return _confirm("End the session", f"/sessions/{info.id}/end", what, session_url(info.id))


def erase_form() -> str:
    return layout(
        "erase a user",
        "<h1>Erase a user's data</h1><p>Every message a platform user wrote, in every session, archived "
        "ones included, is deleted with its search entries; summaries made from them are redacted. "
        "This is the one exception to “nothing is ever deleted”. The next page shows what would go.</p>"
        '<form class="filters" action="/erase" method="get">'
        '<label>platform <input type="text" name="platform" placeholder="telegram"></label> '
        '<label>user id <input type="text" name="user"></label> '
        "<button>Show what would be erased</button></form>",
    )


def confirm_erase(platform: str, user: str, counts: EraseCounts, code: str) -> str:
    """The erasure's confirmation: platform and user id named apart, and ``code`` to type (only this
    page shows it, so no form made elsewhere can carry it)."""
    what = (
        f"<p>Erasing platform <b>{esc(platform)}</b>, user id <b>{esc(user)}</b> deletes "
        f"<b>{counts.messages}</b> messages in {counts.sessions} "
        f"session(s), {counts.inbox} inbox rows and {counts.memories} memory files of their direct chats, "
        f"and redacts {counts.summaries_redacted} summaries made from them. It cannot be undone.</p>"
    )
    fields = (
        f'<input type="hidden" name="platform" value="{esc(platform)}">'
        f'<input type="hidden" name="user" value="{esc(user)}">'
        f'<p><label>type <code>{esc(code)}</code> to confirm <input type="text" name="typed" '
        'autocomplete="off"></label></p>'
    )
    return _confirm("Erase this user's data", "/erase", what, "/erase", fields, danger=True)


def audit_page(
    entries: Sequence[AuditEntry], *, total: int, offset: int, limit: int, notice: str = ""
) -> str:
    """``/audit``: every admin action (and other audited events), newest first."""
    rows = []
    for e in entries:
        target = (
            f'<a href="/sessions/{esc(e.session_id)}">{esc(e.session_id[:12])}</a>'
            if e.session_id
            else esc(f"{e.platform}:{e.user_id}" if e.user_id else (e.platform or ""))
        )
        counts = ", ".join(f"{esc(k)} {v}" for k, v in e.counts.items())
        rows.append(
            f'<tr class="audit"><td>{when(e.created_at)}</td><td>{esc(e.event)}</td>'
            f"<td>{esc(e.actor or '')}</td>"
            f"<td>{target}</td><td>{counts}</td><td>{esc(e.detail)}</td></tr>"
        )
    head = (
        "<tr><th>when (UTC)</th><th>what</th><th>who</th><th>target</th><th>counts</th><th>detail</th></tr>"
    )
    table = (
        f"<table><thead>{head}</thead><tbody>{''.join(rows)}</tbody></table>"
        if rows
        else '<p class="muted">Nothing audited yet.</p>'
    )
    pager = _pager("/audit", offset=offset, limit=limit, has_more=offset + len(entries) < total)
    return layout(
        "audit", f'<h1>Audit trail</h1><p class="muted">{total} entries</p>{table}{pager}', notice=notice
    )
