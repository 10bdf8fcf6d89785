"""Confirmation pages of the admin actions, and the audit view."""

from __future__ import annotations

from urllib.parse import urlencode

from agent.types import CompactionRecord
from gateway.admin.page import esc, layout, when
from gateway.store.records import SessionInfo


def session_url(session_id: str, notice: str = "") -> str:
    return f"/sessions/{session_id}" + (f"?{urlencode({'done': notice[:400]})}" if notice else "")


def _confirm(title: str, action: str, what: str, fields: str = "", *, danger: bool = False) -> str:
    button = "danger" if danger else ""
    return layout(
        title,
        f"<h1>{esc(title)}</h1>{what}"
        f'<form class="confirm" method="post" action="{esc(action)}">{fields}'
        f'<p><button class="{button}" name="confirm" value="yes">Confirm: {esc(title.lower())}</button> '
        '<a href="/">cancel</a></p></form>',
    )


def confirm_restore(info: SessionInfo, latest: CompactionRecord | None) -> str:
    if latest is None:
        what = f"<p>{esc(info.key)} has no compaction to undo.</p>"
        return layout("Undo the latest compaction", f"<h1>Nothing to undo</h1>{what}")
    what = (
        f"<p>Session <b>{esc(info.key)}</b>: the {esc(latest.trigger)} compaction of "
        f"{when(latest.created_at)} archived {latest.messages_archived} messages. Undoing it makes them "
        "active again and retires its summary (nothing is deleted).</p>"
    )
    return _confirm("Undo the latest compaction", f"/sessions/{info.id}/restore", what)
