"""Deterministic token counting and prefix prompt-cache accounting for the fake Anthropic server.

A request is serialized as one segment per cacheable unit, in the order the API builds its
prompt prefix: tools -> system blocks -> message blocks. ``cache_control`` markers are left
out of the segments, so moving a breakpoint does not change the prefix it ends.
Tokens of a prefix = ceil(weight / 4), where a character weighs 1 and a CJK, kana or Hangul
character weighs 4 (one token each, as a real tokenizer counts them), which makes
``input + cache write + cache read`` equal to :func:`count_tokens` for every request.

Like the real API, a request that offers tools pays for the tool-use system prompt the API
adds in front of everything: :data:`TOOL_PREAMBLE_TOKENS` (Claude 4 models, tool_choice auto).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from dataclasses import dataclass
from typing import Any

CHARS_PER_TOKEN = 4
TOOL_PREAMBLE_TOKENS = 346
# Written out here, not imported from agent.tokens: the fake must not share the estimator it checks.
_WIDE = re.compile(
    "[\u1100-\u11ff\u3000-\u30ff\u3130-\u318f\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uff00-\uffef]"
)


def tokens_for_chars(chars: int) -> int:
    """Tokens of a prefix of ``chars`` characters (weight units: a wide character counts 4)."""
    return math.ceil(chars / CHARS_PER_TOKEN)


def weight(part: str) -> int:
    """The weight of a segment: its length, plus 3 per wide character (so each is one token)."""
    return len(part) + (0 if part.isascii() else 3 * len(_WIDE.findall(part)))


def _dump(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def _strip(block: Any) -> Any:
    if isinstance(block, dict):
        return {k: v for k, v in block.items() if k != "cache_control"}
    return block


def _is_breakpoint(block: Any) -> bool:
    return isinstance(block, dict) and "cache_control" in block


def segments(body: dict[str, Any]) -> tuple[list[str], list[int]]:
    """The request as serialized segments, and the indices of segments that carry a breakpoint."""
    out: list[str] = []
    marks: list[int] = []

    def add(tag: str, block: Any, role: str | None = None) -> None:
        if _is_breakpoint(block):
            marks.append(len(out))
        out.append(_dump({tag: _strip(block)} if role is None else {tag: _strip(block), "role": role}))

    if body.get("tools"):
        out.append("~" * (TOOL_PREAMBLE_TOKENS * CHARS_PER_TOKEN))  # the API's tool-use system prompt
    for tool in body.get("tools") or []:
        add("tool", tool)
    system = body.get("system")
    if isinstance(system, str):
        if system:
            add("system", {"type": "text", "text": system})
    elif isinstance(system, list):
        for block in system:
            add("system", block)
    for message in body.get("messages") or []:
        if not isinstance(message, dict):
            continue
        role = str(message.get("role"))
        content = message.get("content")
        if isinstance(content, str):
            add("block", {"type": "text", "text": content}, role)
        elif isinstance(content, list):
            for block in content:
                add("block", block, role)
    return out, marks


def count_tokens(body: dict[str, Any]) -> int:
    """The fake's token count of a request's prompt (system + messages + tools), at least 1."""
    parts, _ = segments(body)
    return max(1, tokens_for_chars(sum(weight(p) for p in parts)))


@dataclass(frozen=True, slots=True)
class CacheUsage:
    """How one request's prompt splits into uncached, written and read tokens."""

    input_tokens: int
    cache_creation_input_tokens: int
    cache_read_input_tokens: int


class PromptCache:
    """Prefix cache keyed by model and the hash of everything up to a breakpoint.

    Like the real API, a lookup considers every block boundary up to the last breakpoint
    (the real one looks back about 20 blocks; the fake has no such limit) and uses the
    longest cached prefix. Prefixes shorter than ``min_cacheable_tokens`` are never cached.
    Entries do not expire; :meth:`clear` forgets them.
    """

    def __init__(self, min_cacheable_tokens: int = 0) -> None:
        self.min_cacheable_tokens = min_cacheable_tokens
        self._entries: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        self._entries.clear()

    def account(self, body: dict[str, Any]) -> CacheUsage:
        """Split the request's tokens into input / cache write / cache read, caching new breakpoints."""
        parts, marks = segments(body)
        total = max(1, tokens_for_chars(sum(weight(p) for p in parts)))
        if not marks:
            return CacheUsage(total, 0, 0)
        digest = hashlib.sha256(str(body.get("model")).encode())
        digests: list[str] = []
        prefix_tokens: list[int] = []
        chars = 0
        for part in parts:
            digest.update(b"\x00" + part.encode())
            digests.append(digest.copy().hexdigest())
            chars += weight(part)
            prefix_tokens.append(tokens_for_chars(chars))
        last = max(marks)
        if prefix_tokens[last] < self.min_cacheable_tokens:
            return CacheUsage(total, 0, 0)
        read = 0
        for index in range(last, -1, -1):
            if digests[index] in self._entries:
                read = prefix_tokens[index]
                break
        for index in marks:
            if prefix_tokens[index] >= self.min_cacheable_tokens:
                self._entries[digests[index]] = prefix_tokens[index]
        write = prefix_tokens[last] - read
        return CacheUsage(total - prefix_tokens[last], write, read)
