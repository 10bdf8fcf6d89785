"""Server-side clearing: the API empties old tool results of the request it receives.

No call of our own and nothing changes in the store: each request carries the
``clear_tool_uses_20250919`` edit, and once the prompt passes ``server_clear_at`` of the
window the API replaces all but the newest ``keep`` tool results by a placeholder before the
model reads them. ``clear_at_least`` makes a clear worth the cached prefix it breaks (the
API skips a clear that would free less). What the API cleared comes back as
``applied_edits`` and is recorded per strategy. See docs/server-side-context.md.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import ClassVar

from agent.clock import utcnow
from agent.provider import LLMRequest, LLMResponse
from agent.server_context import (
    CLEAR_TOOL_USES,
    CONTEXT_MANAGEMENT_BETA,
    ClearToolUsesEdit,
    ContextManagement,
    record_strategy_run,
)
from agent.settings import CompressionSettings
from agent.tokens import content_tokens
from agent.types import AgentSession, ChatMessage, ContextState

# What a cleared result still costs: the API's placeholder text and the block's framing.
PLACEHOLDER_TOKENS = 12


@dataclass(frozen=True, slots=True)
class ServerClearing:
    """The ``clear_tool_uses_20250919`` strategy (``compression.server_clear_tool_uses``)."""

    name: ClassVar[str] = "server_clearing"

    at: float
    keep: int
    clear_at_least: int
    exclude_tools: tuple[str, ...] = ()
    clear_tool_inputs: bool = False

    @classmethod
    def from_settings(cls, settings: CompressionSettings) -> ServerClearing | None:
        """The strategy as configured; None when ``server_clear_tool_uses`` is off."""
        if not settings.server_clear_tool_uses:
            return None
        return cls(
            at=settings.server_clear_at,
            keep=settings.server_clear_keep,
            clear_at_least=settings.server_clear_at_least_tokens,
            exclude_tools=tuple(settings.server_clear_exclude_tools),
            clear_tool_inputs=settings.server_clear_tool_inputs,
        )

    def trigger_tokens(self, session: AgentSession) -> int:
        return max(1, math.ceil(session.budget_window * self.at))

    def edit(self, session: AgentSession) -> ClearToolUsesEdit:
        """The edit as the request carries it."""
        edit: ClearToolUsesEdit = {
            "type": CLEAR_TOOL_USES,
            "trigger": {"type": "input_tokens", "value": self.trigger_tokens(session)},
            "keep": {"type": "tool_uses", "value": self.keep},
            "clear_at_least": {"type": "input_tokens", "value": self.clear_at_least},
            "clear_tool_inputs": self.clear_tool_inputs,
        }
        if self.exclude_tools:
            edit["exclude_tools"] = list(self.exclude_tools)
        return edit

    def shape(self, session: AgentSession, request: LLMRequest) -> LLMRequest:
        """``request`` with the clearing edit (never on an on-demand compaction request, which
        takes no ``context_management``)."""
        if request.compaction is not None:
            return request
        edits = list(request.context_management["edits"]) if request.context_management else []
        managed: ContextManagement = {"edits": [*edits, self.edit(session)]}
        betas = (
            request.betas
            if CONTEXT_MANAGEMENT_BETA in request.betas
            else (*request.betas, CONTEXT_MANAGEMENT_BETA)
        )
        return replace(request, context_management=managed, betas=betas)

    def expected_freed(self, session: AgentSession, view: Sequence[ChatMessage], prompt_tokens: int) -> int:
        """About how many tokens the API will clear from a prompt of ``prompt_tokens`` made of
        ``view`` (0 when it will not clear): what a cheaper strategy frees before ours run."""
        if prompt_tokens <= self.trigger_tokens(session):
            return 0
        names: dict[str, str] = {}
        for message in view:
            if message.role == "assistant":
                names.update(
                    {
                        str(b.get("id")): str(b.get("name"))
                        for b in message.content
                        if b.get("type") == "tool_use"
                    }
                )
        clearable = [use_id for use_id, name in names.items() if name not in self.exclude_tools]
        doomed = set(clearable[: max(0, len(clearable) - self.keep)])
        freed = 0
        for message in view:
            for block in message.content:
                if block.get("type") == "tool_result" and str(block.get("tool_use_id")) in doomed:
                    freed += max(0, content_tokens([block]) - PLACEHOLDER_TOKENS)
        return freed if freed >= self.clear_at_least else 0

    def observe(self, state: ContextState, response: LLMResponse, at: datetime | None = None) -> int:
        """Record what the API cleared from this call's prompt; returns those tokens."""
        cleared = [e for e in response.applied_edits if e.type == CLEAR_TOOL_USES]
        if not cleared:
            return 0
        tokens = sum(e.cleared_input_tokens for e in cleared)
        record_strategy_run(
            state,
            self.name,
            tokens,
            (at or utcnow()).isoformat(),
            last_cleared_tool_uses=sum(e.cleared_tool_uses for e in cleared),
        )
        return tokens
