"""What API version ``2026-10-21`` refuses, and the Fable models' own rules (for the fake server).

Version 2026-10-21 (what anthropic 2.x sends): a ``document`` block in an assistant message is a
400; a text block carrying non-empty ``citations`` in a user message is a 400, at the top level,
inside a tool result or inside a ``search_result``'s content (``"citations": {"enabled": true}``
on the search_result itself stays allowed). Sampling parameters on the models that take none
are refused by :mod:`tests.fakes.anthropic_thinking`. Fable 5.1 refuses a forced ``tool_choice``
(``any`` or ``tool``): only ``auto`` and ``none``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from tests.fakes.anthropic_media import _blocks

API_VERSION = "2026-10-21"
NO_FORCED_TOOL_CHOICE = ("claude-fable-5-1", "claude-mythos-5-1")


def _texts(where: str, block: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """``block`` when it is text, and the text blocks inside a search_result."""
    if block.get("type") == "text":
        yield where, block
    inner = block.get("content")
    if block.get("type") == "search_result" and isinstance(inner, list):
        for k, sub in enumerate(inner):
            if isinstance(sub, dict) and sub.get("type") == "text":
                yield f"{where}.content.{k}", sub


def version_problems(body: dict[str, Any]) -> list[str]:
    """Why API version 2026-10-21 (and the requested model) would refuse this request."""
    problems: list[str] = []
    model = str(body.get("model", ""))
    tool_choice = body.get("tool_choice")
    if (
        any(name in model for name in NO_FORCED_TOOL_CHOICE)
        and isinstance(tool_choice, dict)
        and tool_choice.get("type") in ("any", "tool")
    ):
        problems.append(
            f"tool_choice: forcing tool use is not supported on {model}; use tool_choice auto or none"
        )
    messages = body.get("messages")
    for where, role, block in _blocks(messages if isinstance(messages, list) else []):
        if role == "assistant" and block.get("type") == "document":
            problems.append(f"{where}: document blocks are not allowed in assistant messages")
        if role != "user":
            continue
        for text_where, text in _texts(where, block):
            if text.get("citations"):
                problems.append(f"{text_where}.citations: text citations are not allowed in user messages")
    return problems
