"""Phase 1 of compression, no model involved: old tool outputs become one informative line,
identical outputs are de-duplicated, and oversized tool inputs are shrunk inside valid JSON.

Pruned messages are copies; the originals are archived by the plan, so nothing is lost.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from agent.images import image_size
from agent.tokens import MESSAGE_OVERHEAD_TOKENS, estimate_text_tokens
from agent.types import ChatMessage, ContentBlock, content_text

PRUNED_MARK = "[pruned tool output]"
SAME_MARK = "[same output as"
TRUNCATED_MARK = "…[truncated {n} chars]"
# Outputs shorter than this are cheap: never worth a "same output as" pointer.
DEDUP_MIN_CHARS = 64
# A tool input is shrunk once its JSON is this many times the prune size.
INPUT_PRUNE_FACTOR = 4
_EXIT = re.compile(
    r"(?i)\b(?:exit(?:ed)?(?: with)?(?: code| status)?|return ?code|returncode|exit_code)\W{0,3}(-?\d+)"
)


@dataclass(frozen=True, slots=True)
class PruneResult:
    """The view after pruning (same length; changed entries are copies keeping the original id)."""

    messages: list[ChatMessage]
    changed: tuple[int, ...]


def _one_line(text: str, limit: int) -> str:
    """``text`` with its whitespace collapsed, cut to ``limit``. Only a prefix is collapsed, long
    enough to decide (a tool output can be megabytes): a collapsed prefix is a prefix of the
    collapsed whole, so once it is longer than ``limit`` the result is the same."""
    size = 4 * limit
    while True:
        line = " ".join(text[:size].split())
        if len(line) > limit:
            return line[: limit - 1] + "…"
        if size >= len(text):
            return line
        size *= 4


def _result_parts(block: ContentBlock) -> tuple[str, int]:
    inner = block.get("content", "")
    if isinstance(inner, list):
        blocks = [b for b in inner if isinstance(b, dict)]
        images = sum(1 for b in blocks if b.get("type") in ("image", "document"))
        return content_text([b for b in blocks if b.get("type") in ("text", "search_result")]), images
    return str(inner), 0


def describe_output(
    text: str, images: int, *, name: str, tool_input: Any, message_id: int | None, is_error: bool
) -> str:
    """One line that says what a tool call did and what it returned, in place of its output."""
    args = _one_line(json.dumps(tool_input, ensure_ascii=False, default=str), 80) if tool_input else ""
    facts = [f"{len(text):,} chars", f"{text.count(chr(10)) + 1 if text else 0} lines"]
    if images:
        facts.append(f"{images} image{'s' if images > 1 else ''}")
    exit_match = _EXIT.search(text[-2000:]) or _EXIT.search(text[:2000])
    if exit_match:
        facts.append(f"exit {exit_match.group(1)}")
    if is_error:
        facts.append("error")
    first = _one_line(text, 60)
    return f'{PRUNED_MARK} {name} {args} → {", ".join(facts)}. Starts: "{first}".{_recall(message_id)}'


def _recall(message_id: int | None) -> str:
    """The way back to a pruned message: the recall call that returns its original."""
    if message_id is None:
        return ""
    return f' recall {{"from_id": {message_id}, "to_id": {message_id}}} for the full text.'


def describe_media(block: ContentBlock, message_id: int | None) -> str:
    """One line in place of an old image or PDF (the original stays in the archive)."""
    source = block.get("source")
    media_type = source.get("media_type", "") if isinstance(source, dict) else ""
    data = source.get("data") if isinstance(source, dict) else None
    size = image_size(data) if block.get("type") == "image" and isinstance(data, str) else None
    facts = ", ".join(str(x) for x in (media_type, f"{size[0]}x{size[1]}" if size else None) if x)
    where = (
        f' recall {{"from_id": {message_id}, "to_id": {message_id}}} shows it again.' if message_id else ""
    )
    return f"{PRUNED_MARK} {block.get('type')} ({facts}) archived.{where}"


def shrink_json(value: Any, limit: int) -> Any:
    """``value`` with every string longer than ``limit`` cut, marked; still the same JSON shape."""
    if isinstance(value, str) and len(value) > limit:
        return value[:limit] + TRUNCATED_MARK.format(n=len(value) - limit)
    if isinstance(value, dict):
        return {k: shrink_json(v, limit) for k, v in value.items()}
    if isinstance(value, list):
        return [shrink_json(v, limit) for v in value]
    return value


def _already_pruned(text: str) -> bool:
    return text.startswith((PRUNED_MARK, SAME_MARK))


def prune_messages(
    messages: Sequence[ChatMessage], *, end: int, prune_chars: int, skip: range = range(0)
) -> PruneResult:
    """Prune tool blocks of ``messages[:end]`` (the part outside the protected tail), except those
    in ``skip`` (a range a summary archives as it is)."""
    calls: dict[str, tuple[str, Any]] = {}
    for m in messages:
        for block in m.content:
            if block.get("type") == "tool_use":
                calls[str(block.get("id"))] = (str(block.get("name")), block.get("input"))
    seen: dict[str, str] = {}
    out = list(messages)
    changed: list[int] = []
    for index, m in enumerate(messages[:end]):
        if index in skip:
            continue
        new_content: list[ContentBlock] = []
        touched = False
        for block in m.content:
            new_block = _prune_block(block, m, calls, seen, prune_chars)
            touched = touched or new_block is not block
            new_content.append(new_block)
        if touched:
            # The copy goes into the active view; the archived original keeps the platform id
            # (unique per session), so the copy must not carry it too.
            out[index] = replace(m.with_content(new_content), platform_message_id=None)
            changed.append(index)
    return PruneResult(out, tuple(changed))


def _prune_block(
    block: ContentBlock,
    m: ChatMessage,
    calls: dict[str, tuple[str, Any]],
    seen: dict[str, str],
    prune_chars: int,
) -> ContentBlock:
    kind = block.get("type")
    if kind == "tool_use":
        tool_input = block.get("input")
        size = len(json.dumps(tool_input, ensure_ascii=False, default=str))
        if size > prune_chars * INPUT_PRUNE_FACTOR:
            shrunk = shrink_json(tool_input, prune_chars)
            if shrunk != tool_input:
                return {**block, "input": shrunk}
        return block
    if kind in ("image", "document"):
        return {"type": "text", "text": describe_media(block, m.id)}
    if kind != "tool_result":
        return block
    text, images = _result_parts(block)
    if _already_pruned(text):
        return block
    use_id = str(block.get("tool_use_id"))
    name, tool_input = calls.get(use_id, ("tool", None))
    digest = hashlib.sha1(f"{images}:{text}".encode(), usedforsecurity=False).hexdigest()
    first_id = seen.get(digest)
    if first_id is None and len(text) >= DEDUP_MIN_CHARS:
        seen[digest] = use_id
    if first_id is not None and first_id != use_id:
        line = f"{SAME_MARK} tool call {first_id}] {name}: {len(text):,} chars, identical.{_recall(m.id)}"
        return {**block, "content": line}
    if len(text) > prune_chars or images:
        line = describe_output(
            text,
            images,
            name=name,
            tool_input=tool_input,
            message_id=m.id,
            is_error=bool(block.get("is_error")),
        )
        return {**block, "content": line}
    return block


def unprunable_tokens(m: ChatMessage) -> int:
    """Tokens of ``m`` that pruning never shortens (its text blocks): a lower bound of its size
    after pruning."""
    return MESSAGE_OVERHEAD_TOKENS + sum(
        estimate_text_tokens(str(b.get("text", ""))) for b in m.content if b.get("type") == "text"
    )
