"""One running turn of the tool loop: its mutable state, what it returns, and small readings of a
model reply (the final text, the tool calls, words that came back as thinking)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from agent.cache_diagnostics import Cause
from agent.compaction import WhenSlow
from agent.llm_stream import TurnListener
from agent.provider import LLMRequest
from agent.tools.registry import ToolOffer
from agent.types import (
    AgentSession,
    ChatMessage,
    CompactionRecord,
    ContentBlock,
    ContextState,
    Usage,
    UsageRecord,
)


@dataclass(slots=True)
class TurnResult:
    """What one turn did. ``final_text`` is the last assistant text ("" when there was none)."""

    final_text: str
    messages: list[ChatMessage]
    usages: list[Usage]
    compactions: list[CompactionRecord]
    stopped: str
    iterations: int
    refusal: str | None = None
    """The refusal's category when the model declined ("" when the API named none), else None."""

    @property
    def last_usage(self) -> Usage | None:
        return self.usages[-1] if self.usages else None


@dataclass(slots=True)
class Turn:
    """The mutable state of one running turn."""

    session: AgentSession
    view: list[ChatMessage]
    state: ContextState
    memory_scope: str
    ttl: str | None
    # The tool definitions, fixed for the turn: byte-identical in every request (cache prefix).
    tools: list[dict[str, Any]]
    when_slow: WhenSlow | None = None
    produced: list[ChatMessage] = field(default_factory=list)
    usages: list[Usage] = field(default_factory=list)
    compactions: list[CompactionRecord] = field(default_factory=list)
    # tool_use blocks stored without their results yet, and the results gathered so far.
    open_uses: list[ContentBlock] = field(default_factory=list)
    results: list[ContentBlock] = field(default_factory=list)
    just_compacted: bool = False
    iterations: int = 0
    listener: TurnListener | None = None
    start_id: int | None = None
    """Id of the turn's first message (its question); None until known."""
    saved_state: str | None = None
    """``repr`` of :attr:`state` as this turn last saved it (None: not saved yet)."""
    unrecorded: UsageRecord | None = None
    """The last call's usage, stored with the reply it produced (or alone when there is none)."""
    refusal: str | None = None
    offer: ToolOffer | None = None
    """The tools behind :attr:`tools`, which the turn's tool calls dispatch to."""
    sent: LLMRequest | None = None
    """The last request sent, as sent (with its ``diagnostics``)."""
    cause: Cause = "none"
    """Our own part in a cache miss of :attr:`sent` (see :mod:`agent.cache_diagnostics`)."""

    def tool_offer(self) -> ToolOffer:
        if self.offer is None:
            raise RuntimeError("this turn was built without its tools")
        return self.offer

    def record(self, stored: ChatMessage, *, produced: bool) -> None:
        self.view.append(stored)
        if produced:
            self.produced.append(stored)

    def result(self, stopped: str) -> TurnResult:
        return TurnResult(
            final_text=final_text(self.produced),
            messages=list(self.produced),
            usages=list(self.usages),
            compactions=list(self.compactions),
            stopped=stopped,
            iterations=self.iterations,
            refusal=self.refusal,
        )


def final_text(messages: Sequence[ChatMessage]) -> str:
    for message in reversed(messages):
        if message.role != "assistant":
            continue
        text = "\n".join(str(b.get("text", "")) for b in message.content if b.get("type") == "text").strip()
        if text:
            return text
    return ""


REFUSAL_MARK = "[cut off: the model declined to answer"


def refusal_category(details: dict[str, Any] | None) -> str:
    """The policy area a refusal names ("" when the API named none)."""
    category = (details or {}).get("category")
    return str(category) if category else ""


def refused_message(content: Sequence[ContentBlock], category: str) -> ChatMessage:
    """What is stored for a refused reply: the text written before the cut (tool calls and
    thinking left out: nothing of it ran or will be continued), then a mark saying why it stops.
    A notice, so it is never taken for the answer the user is shown."""
    kept = [dict(b) for b in content if b.get("type") == "text" and str(b.get("text", "")).strip()]
    mark = f"{REFUSAL_MARK} (refusal: {category or 'unspecified'})]"
    return ChatMessage(role="assistant", content=[*kept, {"type": "text", "text": mark}], kind="notice")


SUMMARIZED_THINKING = {"type": "adaptive", "display": "summarized"}


def between_tools_note(content: Sequence[ContentBlock]) -> str:
    """What a tool-calling reply said to the user when its words came back as thinking (the
    5.5 models write their text between tool calls there): shown like text; "" otherwise."""
    kinds = {b.get("type") for b in content}
    if "tool_use" not in kinds or any(b.get("type") == "text" and b.get("text") for b in content):
        return ""
    return "\n".join(str(b.get("thinking", "")) for b in content if b.get("type") == "thinking").strip()


def tool_uses(content: Sequence[ContentBlock]) -> list[ContentBlock]:
    return [b for b in content if b.get("type") == "tool_use"]
