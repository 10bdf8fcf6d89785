"""Deferred tool loading: a large catalog is sent behind the API's tool search tool.

When the definitions a session is offered cost more than ``llm.defer_tools_above_tokens``, the
tools that come from MCP servers carry ``defer_loading: true`` and the API's tool search tool is
added beside them: the API leaves deferred definitions out of the prompt until the model searches
and a ``tool_reference`` in the search result loads them. Our own tools (memory, recall,
session_search, schedule, ...) always stay loaded. The decision is part of the session's frozen
offer, so the cached prefix holds.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from agent.tokens import estimate_text_tokens

ToolSearchVariant = Literal["bm25", "regex"]

SEARCH_TOOLS: dict[str, dict[str, str]] = {
    "bm25": {"type": "tool_search_tool_bm25_20251119", "name": "tool_search_tool_bm25"},
    "regex": {"type": "tool_search_tool_regex_20251119", "name": "tool_search_tool_regex"},
}
SEARCH_TOOL_NAMES = frozenset(tool["name"] for tool in SEARCH_TOOLS.values())
SEARCH_RESULT = "tool_search_tool_result"
DEFAULT_DEFER_ABOVE_TOKENS = 10_000


@dataclass(frozen=True, slots=True)
class ToolDeferral:
    """When deferral applies (the offered definitions' tokens above ``above_tokens``) and which
    search tool then goes with the deferred tools."""

    above_tokens: int = DEFAULT_DEFER_ABOVE_TOKENS
    search: ToolSearchVariant = "bm25"

    def search_tool(self) -> dict[str, Any]:
        return dict(SEARCH_TOOLS[self.search])


def definitions_tokens(definitions: Sequence[dict[str, Any]]) -> int:
    """Tokens of the definitions the API counts: deferred ones are not in the prompt."""
    loaded = [d for d in definitions if not d.get("defer_loading")]
    return estimate_text_tokens(json.dumps(loaded, ensure_ascii=False)) if loaded else 0


def apply_deferral(
    definitions: list[dict[str, Any]], deferrable: Iterable[str], deferral: ToolDeferral | None
) -> list[dict[str, Any]]:
    """``definitions`` as sent: unchanged at or under the threshold (or without a tool that may
    be deferred), else every ``deferrable`` one marked ``defer_loading`` and the search tool added."""
    names = set(deferrable)
    if deferral is None or not any(d.get("name") in names for d in definitions):
        return definitions
    if definitions_tokens(definitions) <= deferral.above_tokens:
        return definitions
    marked = [{**d, "defer_loading": True} if d.get("name") in names else d for d in definitions]
    return [*marked, deferral.search_tool()]


def deferred_names(definitions: Iterable[dict[str, Any]]) -> set[str]:
    return {str(d.get("name")) for d in definitions if d.get("defer_loading")}


def referenced_tools(block: dict[str, Any]) -> list[str]:
    """The tool names a ``tool_search_tool_result`` block (or a client ``tool_result`` of a custom
    search) loads through its ``tool_reference`` blocks."""
    kind = block.get("type")
    if kind == SEARCH_RESULT:
        content = block.get("content")
        refs = content.get("tool_references") if isinstance(content, dict) else None
    elif kind == "tool_result":
        refs = block.get("content")
    else:
        return []
    if not isinstance(refs, list):
        return []
    return [
        str(r["tool_name"])
        for r in refs
        if isinstance(r, dict) and r.get("type") == "tool_reference" and isinstance(r.get("tool_name"), str)
    ]


def load_used_tools(tools: list[dict[str, Any]], messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """``tools`` with a deferred tool loaded up front when the messages call it before any search
    result references it (a compaction archived the search that loaded it): the API refuses a call
    of a deferred tool that was never loaded. The same view gives the same tools, so the prefix
    stays stable until the next compaction."""
    deferred = deferred_names(tools)
    if not deferred:
        return tools
    loaded: set[str] = set()
    orphans: set[str] = set()
    for message in messages:
        content = message.get("content")
        if not isinstance(content, list):
            continue
        for block in content:
            if not isinstance(block, dict):
                continue
            loaded.update(referenced_tools(block))
            name = block.get("name")
            if block.get("type") == "tool_use" and name in deferred and name not in loaded:
                orphans.add(str(name))
    if not orphans:
        return tools
    return [
        {k: v for k, v in t.items() if k != "defer_loading"} if t.get("name") in orphans else t for t in tools
    ]
