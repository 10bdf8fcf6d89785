"""The seam between the agent and a model provider (Anthropic, or the offline one)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from agent.server_context import AppliedEdit, CompactionParam, ContextManagement, Iteration
from agent.types import ContentBlock, Usage

StopReason = Literal[
    "end_turn", "tool_use", "max_tokens", "stop_sequence", "pause_turn", "refusal", "compaction"
]


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
    cache_control: dict[str, str] | None = None
    """A top-level marker: the API's automatic caching (instead of markers on blocks)."""
    thinking: dict[str, str] | None = None
    """The ``thinking`` parameter (adaptive only: the 5.x models refuse a manual budget)."""
    # Server-side context management (docs/server-side-context.md): the edits, an on-demand
    # compaction, and the beta headers they need.
    context_management: ContextManagement | None = None
    compaction: CompactionParam | None = None
    betas: tuple[str, ...] = ()
    fallbacks: str | None = None
    """The API's ``fallbacks`` field (server-side fallback beta); None: not sent."""
    diagnostics: dict[str, str | None] | None = None
    """The ``diagnostics`` field (``previous_message_id``: cache diagnostics); None: not sent."""


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
    applied_edits: tuple[AppliedEdit, ...] = ()
    """The context edits the API applied to this request (``context_management.applied_edits``)."""
    iterations: tuple[Iteration, ...] = ()
    """``usage.iterations``: a server-side compaction's own call is here, not in ``usage``."""
    stop_details: dict[str, Any] | None = None
    """Why the model stopped, when the API says (a refusal's ``category`` and ``explanation``)."""
    id: str | None = None
    """The response's ``id`` (``msg_...``): what the next call names as its previous message."""
    cache_miss: tuple[str, int | None] | None = None
    """``diagnostics.cache_miss_reason``: its type and missed tokens (None: no divergence named)."""

    @property
    def compaction_usage(self) -> Usage | None:
        """What the server-side compaction steps of this call consumed (None: none ran)."""
        steps = [i.usage for i in self.iterations if i.kind == "compaction"]
        if not steps:
            return None
        return Usage(
            input_tokens=sum(u.input_tokens for u in steps),
            output_tokens=sum(u.output_tokens for u in steps),
            cache_creation_input_tokens=sum(u.cache_creation_input_tokens for u in steps),
            cache_read_input_tokens=sum(u.cache_read_input_tokens for u in steps),
        )


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
