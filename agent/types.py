"""Domain objects shared by the agent and the gateway.

Message content is kept as Anthropic content blocks (plain JSON dicts) because that is
what is stored and what the API takes; everything around the content is typed here.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Literal

Role = Literal["user", "assistant"]
MessageKind = Literal["message", "summary", "notice"]
Trigger = Literal["hygiene", "in_loop", "reactive", "manual", "scheduled"]
CompactionStatus = Literal["ok", "fallback", "failed"]
SearchState = Literal["active", "archived", "all"]
SearchSort = Literal["relevance", "recent"]
ContentBlock = dict[str, Any]


def text_block(text: str) -> ContentBlock:
    """A plain text content block."""
    return {"type": "text", "text": text}


@dataclass(frozen=True, slots=True)
class ChatMessage:
    """One message of a conversation, as the agent sees it.

    ``id`` and ``seq`` are set by the store once the message is persisted; a message
    the agent has just produced has neither.
    """

    role: Role
    content: list[ContentBlock]
    kind: MessageKind = "message"
    id: int | None = None
    seq: int | None = None
    author_id: str | None = None
    author_name: str | None = None
    platform_message_id: str | None = None
    created_at: datetime | None = None
    token_estimate: int | None = None
    """Rough tokens of ``content`` (``agent.tokens.content_tokens``), kept by the store; None: not known."""
    active: bool = True
    compacted: bool = False
    compaction_id: str | None = None

    @classmethod
    def user(cls, text: str, **kw: Any) -> ChatMessage:
        return cls(role="user", content=[text_block(text)], **kw)

    @classmethod
    def assistant(cls, text: str, **kw: Any) -> ChatMessage:
        return cls(role="assistant", content=[text_block(text)], **kw)

    @property
    def text(self) -> str:
        """The plain text of the message: text blocks, tool inputs and tool results flattened."""
        return content_text(self.content)

    def tool_use_ids(self) -> list[str]:
        return [str(b["id"]) for b in self.content if b.get("type") == "tool_use"]

    def tool_result_ids(self) -> list[str]:
        return [str(b["tool_use_id"]) for b in self.content if b.get("type") == "tool_result"]

    def with_content(self, content: list[ContentBlock]) -> ChatMessage:
        # New content, so the stored token figure (which was the old content's) no longer holds.
        return replace(self, content=content, token_estimate=None)

    def to_wire(self) -> dict[str, Any]:
        """The message as the Messages API takes it."""
        return {"role": self.role, "content": [dict(b) for b in self.content]}


def content_text(content: list[ContentBlock]) -> str:
    """Flatten content blocks to searchable, countable text."""
    parts: list[str] = []
    for block in content:
        kind = block.get("type")
        if kind == "text":
            parts.append(str(block.get("text", "")))
        elif kind == "tool_use":
            parts.append(
                f"[tool {block.get('name')}] {json.dumps(block.get('input', {}), ensure_ascii=False)}"
            )
        elif kind == "tool_result":
            inner = block.get("content", "")
            if isinstance(inner, list):
                parts.append(content_text(inner))
            else:
                parts.append(str(inner))
        elif kind == "search_result":
            inner = block.get("content", [])
            body = content_text(inner) if isinstance(inner, list) else str(inner)
            parts.append(f"{block.get('title', '')}: {body}")
        elif kind in ("image", "document"):
            parts.append(f"[{kind}]")
        elif kind == "server_tool_use":  # the API's tool search, run on its side
            parts.append(f"[tool search] {json.dumps(block.get('input', {}), ensure_ascii=False)}")
        elif kind == "tool_search_tool_result":
            inner = block.get("content")
            refs = inner.get("tool_references") if isinstance(inner, dict) else None
            found = [str(r.get("tool_name")) for r in refs or () if isinstance(r, dict)]
            parts.append(f"[tools found] {', '.join(found) or 'none'}")
        elif kind == "compaction":  # the API's server-side summary
            parts.append(str(block.get("content") or ""))
    return "\n".join(p for p in parts if p)


def effective_budget(window: int, budget: int | None) -> int:
    """The room every compaction threshold is a fraction of (in-loop, hygiene, the overnight
    sweep, pruning, ``/context``, ``doctor``): min(window, budget), or the whole window without
    a budget. Computed here only, so no two triggers can disagree on what "full" means."""
    return window if budget is None else min(window, budget)


@dataclass(frozen=True, slots=True)
class AgentSession:
    """What the agent needs to know about the conversation it serves."""

    id: str
    system_prompt: str
    model: str
    context_window: int
    key: str = ""
    platform: str = ""
    budget_tokens: int | None = None
    """The context budget (None: the whole window); thresholds apply to :attr:`budget_window`."""

    @property
    def budget_window(self) -> int:
        """The effective budget every threshold is a fraction of (:func:`effective_budget`)."""
        return effective_budget(self.context_window, self.budget_tokens)

    summary_model: str | None = None
    """This conversation's summary model, when it has its own (else the engine's)."""


@dataclass(frozen=True, slots=True)
class Usage:
    """Token usage of ONE API call."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0
    cache_creation_1h_input_tokens: int | None = None
    """The part of the cache writes made with the 1-hour TTL; None when the API did not say."""

    @property
    def context_tokens(self) -> int:
        """The prompt size of this call: never sum this across the calls of a loop."""
        return self.input_tokens + self.cache_creation_input_tokens + self.cache_read_input_tokens


@dataclass(frozen=True, slots=True)
class CacheCheck:
    """What cache diagnostics said of one chat call: the API's miss reason (None: the prefix
    was reused, or nothing to compare), the tokens it says were missed, and our own part in it
    (``cause``: compaction, catalog, model, new_session or none; ``ours``: a miss we made)."""

    reason: str | None
    missed_tokens: int | None
    cause: str
    ours: bool


@dataclass(frozen=True, slots=True)
class UsageRecord:
    """One API call's usage as stored (one row of the ``usage`` table)."""

    model: str
    purpose: Literal["chat", "summary", "count"]
    usage: Usage
    cost_usd: float
    estimated: bool = False
    cache: CacheCheck | None = None
    """A chat call's cache diagnostics (None for calls that do not carry them)."""


@dataclass(frozen=True, slots=True)
class Insertion:
    """A message a compaction adds to the active view, placed where ``anchor_id`` was."""

    anchor_id: int
    message: ChatMessage


@dataclass(frozen=True, slots=True)
class CompactionPlan:
    """What one compaction changes, applied by the store in ONE transaction.

    ``archive_ids`` become ``active=false, compacted=true``; each insertion takes the
    place of its anchor in the active view (a summary is anchored on the first archived
    message; a pruned copy on the message it replaces). Messages not named here stay as
    they are, including any appended while the compaction ran.
    """

    trigger: Trigger
    archive_ids: tuple[int, ...]
    insertions: tuple[Insertion, ...]
    first_kept_id: int | None
    tokens_before: int
    tokens_after: int
    model: str
    duration_ms: int
    status: CompactionStatus = "ok"
    focus: str | None = None
    # Chosen when planning, so the summary can point at exactly the rows this compaction archives.
    compaction_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    strategy: str = "summary"
    """Which strategy produced the plan (``prune``, ``snip``, ``summary``, ``sliding``, ...)."""


@dataclass(frozen=True, slots=True)
class CompactionRecord:
    """A compaction as stored (one row of the ``compactions`` table)."""

    id: str
    session_id: str
    trigger: Trigger
    status: CompactionStatus
    archived_from_seq: int | None
    archived_to_seq: int | None
    messages_archived: int
    summary_message_id: int | None
    first_kept_id: int | None
    tokens_before: int
    tokens_after: int
    model: str
    duration_ms: int
    focus: str | None
    created_at: datetime
    restored_at: datetime | None = None
    strategy: str = "summary"

    @property
    def tokens_freed(self) -> int:
        return max(0, self.tokens_before - self.tokens_after)


EngineFailureKind = Literal["raised", "timeout", "invalid"]


@dataclass(frozen=True, slots=True)
class EngineFailure:
    """A context engine that raised, timed out or planned something the validator refused; the
    built-in compressor served that call instead."""

    engine: str
    operation: str
    kind: EngineFailureKind
    reason: str


@dataclass(frozen=True, slots=True)
class StrategyRun:
    """A strategy that freed tokens without a compaction row: the API's tool-result clearing
    changes the request, not the store, so each call it cleared is kept as one of these."""

    strategy: str
    tokens_freed: int
    detail: dict[str, int] = field(default_factory=dict)


def strategy_summary(records: Sequence[CompactionRecord]) -> list[tuple[str, int, int]]:
    """(strategy, runs, tokens freed) over ``records``, in the order each strategy first ran."""
    runs: dict[str, list[int]] = {}
    for record in records:
        entry = runs.setdefault(record.strategy, [0, 0])
        entry[0] += 1
        entry[1] += record.tokens_freed
    return [(name, n, freed) for name, (n, freed) in runs.items()]


@dataclass(frozen=True, slots=True)
class SearchFilters:
    """Filters for full-text search; ``None`` means "any"."""

    platform: str | None = None
    chat_id: str | None = None
    session_id: str | None = None
    user_id: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    state: SearchState = "all"
    before_id: int | None = None
    """Only messages with a smaller id (a search from inside a turn leaves the turn's own out)."""
    with_delegations: bool = False
    """With ``session_id``: the session's sub-agent runs (``delegate``) too."""


HIT_START = "\ue000"
HIT_END = "\ue001"
"""A search snippet marks each match as ``HIT_START + match + HIT_END``: private-use characters
that the store removes from the text it quotes, so a marker can never be literal text."""


def snippet_parts(snippet: str) -> list[tuple[str, bool]]:
    """A snippet as ``(text, is_match)`` parts, in order, without the markers."""
    parts: list[tuple[str, bool]] = []
    for i, chunk in enumerate(snippet.split(HIT_START)):
        inside, _, after = chunk.partition(HIT_END) if i else ("", "", chunk)
        parts += [(text, match) for text, match in ((inside, True), (after, False)) if text]
    return parts


@dataclass(frozen=True, slots=True)
class SearchHit:
    """One ranked search result; ``snippet`` marks matches with :data:`HIT_START` / :data:`HIT_END`."""

    message_id: int
    session_id: str
    seq: int
    role: Role
    kind: MessageKind
    author_name: str | None
    created_at: datetime
    active: bool
    compacted: bool
    compaction_id: str | None
    snippet: str
    rank: float
    substring: bool = False
    """Found only as part of a longer word (the substring tier); such hits follow every whole-word hit."""


@dataclass(frozen=True, slots=True)
class RecallPage:
    """A page of archived messages, verbatim, with where to continue."""

    messages: list[ChatMessage]
    total: int
    offset: int
    next_offset: int | None


@dataclass(slots=True)
class ContextState:
    """Per-session compression bookkeeping that must survive restarts."""

    last_prompt_tokens: int | None = None
    last_prompt_at: datetime | None = None
    # The rough (uncalibrated) token estimate of the messages that ``last_prompt_tokens`` counted.
    last_prompt_estimate: int | None = None
    # Real message tokens per rough estimated token, learned from API usage (agent.tokens.calibrate).
    token_scale: float | None = None
    # The model the scale, the last real count and the API-reported limit were learned on:
    # tokenizers differ (5.x counts ~30% more than 4.x), so they never carry to another model.
    token_scale_model: str | None = None
    cooldown_until: datetime | None = None
    consecutive_failures: int = 0
    ineffective_strikes: int = 0
    strike_context_tokens: int | None = None
    hygiene_failures: int = 0
    hygiene_cooldown_until: datetime | None = None
    compaction_count: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class MemoryEntry:
    """One durable note under ``/memories``."""

    path: str
    content: str
    updated_at: datetime | None = None
