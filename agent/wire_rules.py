"""What API version 2026-10-21 refuses in the messages of a request, taken out before sending.

A text block in a user message may not carry ``citations`` (at the top level, in a tool result,
or inside a ``search_result``'s content), and an assistant message may not hold a ``document``
block. Our own turns never make either, but a stored or imported transcript can (an assistant
answer pasted back as a user turn keeps its citations): one such row would make every later
call of the session a 400. The cited text stays; only the citation objects go, and an
assistant's document becomes a short text note.
"""

from __future__ import annotations

from typing import Any

from agent.types import ContentBlock


def version_safe(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``messages`` with what the API refuses taken out; unchanged messages are the same objects
    (the request memo reuses them)."""
    out: list[dict[str, Any]] = []
    for message in messages:
        content = message.get("content")
        if not isinstance(content, list):
            out.append(message)
            continue
        role = message.get("role")
        fixed = [_block(block, role) for block in content]
        changed = any(a is not b for a, b in zip(fixed, content, strict=True))
        out.append({**message, "content": fixed} if changed else message)
    return out


def _block(block: Any, role: Any) -> Any:
    if not isinstance(block, dict):
        return block
    kind = block.get("type")
    if role == "assistant":
        if kind == "document":
            title = block.get("title")
            return {"type": "text", "text": f"[document{': ' + str(title) if title else ''}]"}
        return block
    if kind == "text" and block.get("citations"):
        return _uncited(block)
    inner = block.get("content")
    if kind in ("tool_result", "search_result") and isinstance(inner, list):
        fixed = [_block(sub, role) for sub in inner]
        if any(a is not b for a, b in zip(fixed, inner, strict=True)):
            return {**block, "content": fixed}
    return block


def _uncited(block: ContentBlock) -> ContentBlock:
    return {key: value for key, value in block.items() if key != "citations"}
