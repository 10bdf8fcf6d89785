"""The Messages API's answer, read and checked before anything else touches it.

A server may send anything: JSON nested past the interpreter's recursion limit, ``usage`` as a
string, ``content`` that is not a list, counts that are negative, fractional or infinite. Each
of these becomes :class:`MalformedAnswer` with a sentence naming the field, so what reaches the
loop is a message whose blocks and counts have the types the rest of the agent relies on.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from agent.errors import LLMError
from agent.server_context import AppliedEdit, Iteration, parse_applied_edits, parse_iterations
from agent.types import ContentBlock, Usage

# Larger than any real count (a window is 10**6 tokens); past it a figure is nonsense.
MAX_COUNT = 10**12
# Fields a block of these types must carry as strings (or, for ``input``, an object).
_STRING_FIELDS = {
    "text": ("text",),
    "thinking": ("thinking",),
    "redacted_thinking": ("data",),
    "tool_use": ("id", "name"),
    "server_tool_use": ("id", "name"),
}


class MalformedAnswer(LLMError):
    """The provider's answer is not a message of the Messages API (never retried)."""

    def __init__(self, detail: str) -> None:
        super().__init__(f"Anthropic API: malformed answer: {detail}")


def decode_message(body: bytes) -> dict[str, Any]:
    """A plain call's answer as a checked message."""
    try:
        data = json.loads(body)
    except RecursionError as exc:
        raise MalformedAnswer("JSON nested too deeply") from exc
    except ValueError as exc:
        raise MalformedAnswer("not JSON") from exc
    return checked_message(data)


def checked_message(data: Any) -> dict[str, Any]:
    """``data`` when it is a message whose content blocks and usage are well formed."""
    if not isinstance(data, dict):
        raise MalformedAnswer("not a JSON object")
    content = data.get("content")
    if not isinstance(content, list):
        raise MalformedAnswer("no content list")
    for index, block in enumerate(content):
        _check_block(index, block)
    if not isinstance(data.get("usage"), dict):
        raise MalformedAnswer("no usage object")
    for name in ("stop_reason", "model"):
        if data.get(name) is not None and not isinstance(data[name], str):
            raise MalformedAnswer(f"{name} is not a string")
    return data


def _check_block(index: int, block: Any) -> None:
    if not isinstance(block, dict) or not isinstance(block.get("type"), str):
        raise MalformedAnswer(f"content[{index}] is not a block with a type")
    for name in _STRING_FIELDS.get(block["type"], ()):
        if not isinstance(block.get(name), str):
            raise MalformedAnswer(f"content[{index}].{name} is not a string")
    if block["type"] in ("tool_use", "server_tool_use") and not isinstance(block.get("input"), dict):
        raise MalformedAnswer(f"content[{index}].input is not an object")


def count(value: Any, name: str) -> int:
    """A token count as the API gives it: a non-negative whole number (0 when absent)."""
    if value is None:
        return 0
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_COUNT:
        raise MalformedAnswer(f"usage.{name} is not a token count ({str(value)[:40]!r})")
    return value


def usage_of(raw: Mapping[str, Any], final: Mapping[str, Any] | None = None) -> Usage:
    """Our :class:`Usage` from a response's ``usage``; ``final`` (a stream's last
    ``message_delta`` usage) wins for every figure it carries, the TTL split of the cache
    writes included."""

    def figure(name: str) -> Any:
        value = final.get(name) if final is not None else None
        return value if value is not None else raw.get(name)

    split = figure("cache_creation")
    hour = split.get("ephemeral_1h_input_tokens") if isinstance(split, dict) else None
    return Usage(
        input_tokens=count(figure("input_tokens"), "input_tokens"),
        output_tokens=count(figure("output_tokens"), "output_tokens"),
        cache_creation_input_tokens=count(
            figure("cache_creation_input_tokens"), "cache_creation_input_tokens"
        ),
        cache_read_input_tokens=count(figure("cache_read_input_tokens"), "cache_read_input_tokens"),
        cache_creation_1h_input_tokens=None
        if hour is None
        else count(hour, "cache_creation.ephemeral_1h_input_tokens"),
    )


def without_nulls(value: Any) -> Any:
    """``value`` without the keys whose value is null, at every depth (as the SDK's
    ``to_dict(exclude_none=True)`` gives a block: what is stored is the same either way)."""
    if isinstance(value, dict):
        return {k: without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [without_nulls(v) for v in value]
    return value


def content_of(message: Mapping[str, Any]) -> list[ContentBlock]:
    """The checked message's blocks as stored (nulls left out)."""
    try:
        return [without_nulls(block) for block in message["content"]]
    except RecursionError as exc:
        raise MalformedAnswer("a content block nested too deeply") from exc


def extras_of(message: Mapping[str, Any]) -> tuple[tuple[AppliedEdit, ...], tuple[Iteration, ...]]:
    """The context edits the API applied and the iterations it ran, from a checked message."""
    try:
        return (
            parse_applied_edits(message.get("context_management")),
            parse_iterations(message["usage"].get("iterations")),
        )
    except (TypeError, ValueError, OverflowError, AttributeError) as exc:
        raise MalformedAnswer(f"context_management or usage.iterations: {exc}") from exc
