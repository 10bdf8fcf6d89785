"""Search hits as Anthropic ``search_result`` blocks, so that an answer can cite the archived turn.

A citable tool output keeps its plain text (what models without search results read) and, next to
it, one block per hit: ``source`` names the session and the message, ``title`` says who and when,
``content`` is the hit's text, citations on. :func:`plain_search_results` turns the blocks back
into text blocks for a model that does not take them.
"""

from __future__ import annotations

from typing import Any

from agent.types import ContentBlock


def message_source(session_id: str, message_id: int | None) -> str:
    """The ``source`` of a hit: which session, which message (ids as session_search and recall show them)."""
    return f"hygieia://session/{session_id}/message/{message_id}"


def search_result(source: str, title: str, text: str) -> ContentBlock:
    """One ``search_result`` block; empty text is refused by the API, so it becomes a placeholder."""
    return {
        "type": "search_result",
        "source": source,
        "title": title,
        "content": [{"type": "text", "text": text if text.strip() else "(no text)"}],
        "citations": {"enabled": True},
    }


def search_result_text(block: ContentBlock) -> str:
    """A search_result block as one line of plain text (title, then its content)."""
    inner = " ".join(str(c.get("text", "")) for c in block.get("content", []) if isinstance(c, dict))
    return f"{block.get('title', '')}: {inner}"


def plain_search_results(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Wire messages with every search_result block (in tool results) as a text block instead."""
    out: list[dict[str, Any]] = []
    for message in messages:
        content = message.get("content")
        if not isinstance(content, list) or not any(_carries(b) for b in content):
            out.append(message)
            continue
        out.append({**message, "content": [_plain_block(b) for b in content]})
    return out


def _carries(block: Any) -> bool:
    if not isinstance(block, dict):
        return False
    if block.get("type") == "search_result":
        return True
    inner = block.get("content")
    return block.get("type") == "tool_result" and isinstance(inner, list) and any(_carries(b) for b in inner)


def _plain_block(block: Any) -> Any:
    if not isinstance(block, dict):
        return block
    if block.get("type") == "search_result":
        plain: ContentBlock = {"type": "text", "text": search_result_text(block)}
        if "cache_control" in block:
            plain["cache_control"] = block["cache_control"]
        return plain
    inner = block.get("content")
    if block.get("type") == "tool_result" and isinstance(inner, list):
        return {**block, "content": [_plain_block(b) for b in inner]}
    return block
