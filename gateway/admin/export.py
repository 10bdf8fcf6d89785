"""A session as JSON Lines (for machines: imports back whole) or Markdown (for a person to read).

JSONL: one object per line, each with a ``type``: first ``session`` (with ``format``), then
every ``compaction`` in order, then every ``message`` in transcript order, archived ones
included, each saying which compaction archived it (``compaction_id``) or produced it
(``produced_by``). Markdown: the same transcript, archived runs marked, each compaction's
boundary a heading where its summary sits.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from datetime import datetime
from typing import Any, Literal

from agent.types import content_text
from gateway.admin.import_rows import FORMAT, ImportProblems, parse_rows, to_export
from gateway.errors import GatewayError
from gateway.store.export_ops import SessionExport

Format = Literal["jsonl", "md"]
MEDIA_TYPES = {"jsonl": "application/x-ndjson; charset=utf-8", "md": "text/markdown; charset=utf-8"}


class ExportFormatError(GatewayError):
    """A file that is not a session export (or not one this version reads)."""


def _default(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    raise TypeError(f"not JSON serializable: {type(value).__name__}")


def _line(kind: str, row: dict[str, Any], **extra: Any) -> str:
    return json.dumps({"type": kind, **extra, **row}, default=_default, ensure_ascii=False) + "\n"


def to_jsonl(data: SessionExport) -> Iterator[str]:
    """The export as lines of JSON (each ends with a newline)."""
    yield _line("session", data.session, format=FORMAT)
    for c in data.compactions:
        yield _line("compaction", c)
    for m in data.messages:
        yield _line("message", m)


def from_jsonl(lines: Iterable[str]) -> SessionExport:
    """Read an export back, every row validated (:mod:`gateway.admin.import_rows`);
    ExportFormatError listing each bad row, one line each, when it is not a good one."""
    try:
        return to_export(*parse_rows(lines))
    except ImportProblems as exc:
        raise ExportFormatError("\n".join(exc.problems)) from None


def _when(value: Any) -> str:
    return value.strftime("%Y-%m-%d %H:%M UTC") if isinstance(value, datetime) else "-"


def _quote(text: str) -> str:
    return "\n".join("> " + line if line else ">" for line in text.splitlines()) or ">"


def to_markdown(data: SessionExport) -> str:
    """The transcript for a person: who said what when, archived runs and compactions marked."""
    s = data.session
    by_id = {c["id"]: c for c in data.compactions}
    archived = sum(1 for m in data.messages if not m["active"])
    out = [
        f"# {s['key']}",
        "",
        f"- session `{s['id']}` · {s['platform']} · chat `{s['chat_id']}` · model {s['model']}",
        f"- created {_when(s['created_at'])} · last activity {_when(s['last_activity_at'])}"
        + (f" · ended {_when(s['ended_at'])} ({s['end_reason']})" if s.get("ended_at") else ""),
        f"- {len(data.messages)} messages ({len(data.messages) - archived} in the active view, "
        f"{archived} archived) · {len(data.compactions)} compaction(s)",
        "",
    ]
    in_archive: str | None = None
    for m in data.messages:
        state = None if m["active"] else (m.get("compaction_id") or "retired")
        if state != in_archive:
            if in_archive is not None:
                out += ["*— end of archived messages —*", ""]
            if state is not None:
                c = by_id.get(state)
                label = (
                    f"archived by compaction {c['number']} ({c['trigger']}, {_when(c['created_at'])})"
                    if c
                    else "retired by an undone compaction"
                )
                out += [f"*— {label} —*", ""]
            in_archive = state
        producer = by_id.get(m.get("produced_by") or "")
        if m["kind"] == "summary" and producer is not None:
            undone = f", undone {_when(producer['restored_at'])}" if producer.get("restored_at") else ""
            title = (
                f"Compaction {producer['number']} · {producer['trigger']} · {_when(producer['created_at'])}"
            )
            out += [
                f"## {title}",
                "",
                f"{producer['messages_archived']} messages archived, {producer['tokens_before']:,} -> "
                f"{producer['tokens_after']:,} tokens{undone}. Summary:",
                "",
                _quote(content_text(m["content"] or [])),
                "",
            ]
            continue
        who = m.get("author_name") or m["role"]
        tags = "" if m["kind"] == "message" else f" · {m['kind']}"
        out += [f"**{who}** ({m['role']}{tags}) · {_when(m['created_at'])} · #{m['id']}", ""]
        out += [content_text(m["content"] or []) or "*(empty)*", ""]
    if in_archive is not None:
        out += ["*— end of archived messages —*", ""]
    return "\n".join(out)


def render(data: SessionExport, fmt: Format) -> str:
    return "".join(to_jsonl(data)) if fmt == "jsonl" else to_markdown(data)
