"""Sub-agent runs as the operator sees them: a chat session's page lists the runs its ``delegate``
calls made, each linked to its own transcript; a sub-agent's page links back to its chat."""

from __future__ import annotations

from collections.abc import Sequence

from gateway.admin.page import esc, when
from gateway.store.records import SessionInfo


def sub_agent_runs(info: SessionInfo, runs: Sequence[SessionInfo]) -> str:
    """The session's sub-agent runs, oldest first, or the link to the chat that ran this one."""
    if info.parent_session_id is not None:
        parent = esc(info.parent_session_id)
        return f'<p>A sub-agent run of the chat session <a href="/sessions/{parent}">{parent[:12]}</a>.</p>'
    if not runs:
        return ""
    rows = "".join(
        f'<tr><td>{when(r.created_at)}</td><td><a href="/sessions/{esc(r.id)}">{esc(r.id[:12])}</a></td>'
        f"<td>{esc(r.model)}</td><td>{esc(_outcome(r))}</td></tr>"
        for r in runs
    )
    head = "<tr><th>when</th><th>transcript</th><th>model</th><th>outcome</th></tr>"
    return f"<h2>Sub-agent runs</h2><table>{head}{rows}</table>"


def _outcome(run: SessionInfo) -> str:
    if run.end_reason is None:
        return "running"
    return run.end_reason.removeprefix("delegation ")
