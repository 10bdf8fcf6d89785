"""``search_result`` blocks checked as the Messages API checks them (for the fake server).

Shape (platform.claude.com, "Search results"): ``type`` "search_result", ``source`` and ``title``
strings, ``content`` a non-empty list of non-empty text blocks, optional ``citations``
``{"enabled": bool}`` and ``cache_control``, nothing else. Allowed in user turns, at the top level
or inside a tool result. Citations are all or nothing: every search result of a request has the
same setting. Only models that support search results take them.
"""

from __future__ import annotations

from typing import Any

from tests.fakes.anthropic_media import _blocks

ALLOWED_KEYS = frozenset({"type", "source", "title", "content", "citations", "cache_control"})
# Older models refuse search_result content (the feature list names the 3.5/3.7 and 4.x families on).
UNSUPPORTED_MODELS = ("claude-3-haiku", "claude-3-opus", "claude-3-sonnet", "claude-2", "claude-instant")


def search_result_problems(model: str, messages: list[Any]) -> list[str]:
    """What the API would refuse about the search_result blocks of a request."""
    problems: list[str] = []
    settings: set[bool] = set()
    found = False
    for where, role, block in _blocks(messages):
        if block.get("type") != "search_result":
            continue
        found = True
        if role != "user":
            problems.append(f"{where}: search_result content is only allowed in user messages")
        problems.extend(_shape_problems(where, block))
        citations = block.get("citations")
        settings.add(bool(isinstance(citations, dict) and citations.get("enabled")))
    if len(settings) > 1:
        problems.append(
            "messages: citations must be either enabled or disabled for all search results in a request"
        )
    if found and any(name in model for name in UNSUPPORTED_MODELS):
        problems.append(f"search_result content blocks are not supported by model {model}")
    return problems


def _shape_problems(where: str, block: dict[str, Any]) -> list[str]:
    problems = [f"{where}.{key}: Extra inputs are not permitted" for key in block if key not in ALLOWED_KEYS]
    for key in ("source", "title"):
        value = block.get(key)
        if not isinstance(value, str):
            problems.append(f"{where}.{key}: Field required (a string)")
        elif key == "source" and not value:
            problems.append(f"{where}.source: must be non-empty")
    content = block.get("content")
    if not isinstance(content, list) or not content:
        problems.append(f"{where}.content: must be a non-empty list of text blocks")
    else:
        for k, inner in enumerate(content):
            if not isinstance(inner, dict) or inner.get("type") != "text":
                problems.append(f"{where}.content.{k}: only text blocks are allowed in a search result")
            elif not isinstance(inner.get("text"), str) or not inner["text"]:
                problems.append(f"{where}.content.{k}: text content blocks must be non-empty")
    citations = block.get("citations")
    if citations is not None and (
        not isinstance(citations, dict)
        or set(citations) - {"enabled"}
        or not isinstance(citations.get("enabled"), bool)
    ):
        problems.append(f"{where}.citations: must be an object with a boolean 'enabled'")
    return problems
