"""The seam between the agent and a model provider (Anthropic, or the offline one)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from agent.types import ContentBlock, Usage

StopReason = Literal["end_turn", "tool_use", "max_tokens", "stop_sequence", "pause_turn", "refusal"]


@dataclass(frozen=True, slots=True)
class LLMRequest:
    """One Messages API call, already in wire shape (cache_control placed by the caller)."""

    model: str
    messages: list[dict[str, Any]]
    max_tokens: int
    system: list[ContentBlock] = field(default_factory=list)
    tools: list[dict[str, Any]] = field(default_factory=list)
    temperature: float | None = None
    purpose: Literal["chat", "summary"] = "chat"


@dataclass(frozen=True, slots=True)
class LLMResponse:
    """What a call returned: the assistant content, why it stopped, and its usage."""

    content: list[ContentBlock]
    stop_reason: StopReason | str
    usage: Usage
    model: str
    estimated_usage: bool = False
    billed: bool = True
    """False for a provider that costs nothing (the offline one): its calls are stored at $0."""


class LLMProvider(Protocol):
    """Anything that can answer a Messages API request.

    Implementations raise only :class:`agent.errors.LLMError` subclasses.
    """

    name: str

    async def create(self, request: LLMRequest) -> LLMResponse: ...

    async def count_tokens(self, request: LLMRequest) -> int | None:
        """Exact prompt tokens when the provider can count them, else ``None``."""
        ...

    async def aclose(self) -> None: ...
