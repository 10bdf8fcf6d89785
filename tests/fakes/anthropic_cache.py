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
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

CHARS_PER_TOKEN = 4
TTL_SECONDS = {"5m": 300.0, "1h": 3600.0}
TOOL_PREAMBLE_TOKENS = 346
# Block boundaries before a breakpoint where the API looks for a cached prefix ("about 20").
LOOKBACK_BLOCKS = 20
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


def _ttl(marker: Any) -> str:
    return "1h" if isinstance(marker, dict) and marker.get("ttl") == "1h" else "5m"


def _cacheable(block: Any) -> bool:
    if not isinstance(block, dict) or "thinking" in str(block.get("type")):
        return False
    return not (block.get("type") == "text" and not block.get("text"))


def segments(body: dict[str, Any]) -> tuple[list[str], list[int]]:
    """The request as serialized segments, and the indices of segments that carry a breakpoint.

    A top-level ``cache_control`` (automatic caching) is a breakpoint on the last cacheable block.
    """
    out: list[str] = []
    marks: list[int] = []
    last_cacheable = -1

    def add(tag: str, block: Any, role: str | None = None) -> None:
        nonlocal last_cacheable
        if _is_breakpoint(block):
            marks.append(len(out))
        if _cacheable(block):
            last_cacheable = len(out)
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
    if isinstance(body.get("cache_control"), dict) and last_cacheable >= 0 and last_cacheable not in marks:
        marks.append(last_cacheable)
    return out, marks


def write_ttl(body: dict[str, Any]) -> str:
    """The TTL of the request's last breakpoint (the automatic one when there is one)."""
    top = body.get("cache_control")
    if isinstance(top, dict):
        return _ttl(top)
    system = body.get("system")
    blocks: list[Any] = list(body.get("tools") or []) + (list(system) if isinstance(system, list) else [])
    for message in body.get("messages") or []:
        content = message.get("content") if isinstance(message, dict) else None
        blocks.extend(content if isinstance(content, list) else [])
    marked = [b["cache_control"] for b in blocks if _is_breakpoint(b)]
    return _ttl(marked[-1]) if marked else "5m"


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
    cache_creation_1h_input_tokens: int = 0


class PromptCache:
    """Prefix cache keyed by model and the hash of everything up to a breakpoint.

    Like the real API, a lookup considers the block boundaries at and up to ``lookback`` (20)
    blocks before each breakpoint, and uses the longest cached prefix among them; an entry
    further back is not found even when it is alive and matches. Prefixes shorter than
    ``min_cacheable_tokens`` are never cached.
    With a ``clock`` (seconds), an entry lives its TTL (5 minutes, or an hour when written with
    ``"ttl": "1h"``) from its last use, like the API's; without one entries do not expire.
    :meth:`clear` forgets them.
    """

    def __init__(
        self,
        min_cacheable_tokens: int = 0,
        clock: Callable[[], float] | None = None,
        lookback: int | None = LOOKBACK_BLOCKS,
    ) -> None:
        self.min_cacheable_tokens = min_cacheable_tokens
        self.clock = clock
        # How many block boundaries before a breakpoint a lookup tries (the API: about 20);
        # None: every boundary.
        self.lookback = lookback
        self._entries: dict[str, int] = {}
        self._expiry: dict[str, tuple[float, str]] = {}

    def _alive(self, digest: str) -> bool:
        if digest not in self._entries:
            return False
        if self.clock is None or digest not in self._expiry:
            return True
        if self._expiry[digest][0] < self.clock():
            del self._entries[digest], self._expiry[digest]
            return False
        return True

    def _keep(self, digest: str, ttl: str) -> None:
        if self.clock is not None:
            known = self._expiry.get(digest, (0.0, "5m"))[1]
            longest = "1h" if "1h" in (ttl, known) else "5m"
            self._expiry[digest] = (self.clock() + TTL_SECONDS[longest], longest)

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
        ttl = write_ttl(body)
        read = 0
        if self.lookback is None:
            candidates = list(range(last, -1, -1))
        else:
            reach = {i for m in marks for i in range(max(0, m - self.lookback), m + 1)}
            candidates = sorted(reach, reverse=True)
        for index in candidates:
            if self._alive(digests[index]):
                read = prefix_tokens[index]
                self._keep(digests[index], "5m")  # a hit refreshes the entry for its own TTL
                break
        for index in marks:
            if prefix_tokens[index] >= self.min_cacheable_tokens:
                self._entries[digests[index]] = prefix_tokens[index]
                self._keep(digests[index], ttl)
        write = prefix_tokens[last] - read
        return CacheUsage(total - prefix_tokens[last], write, read, write if ttl == "1h" else 0)
