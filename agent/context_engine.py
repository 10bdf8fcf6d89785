"""The pluggable context engine: decides when to compress and how.

Compression is one operation with several triggers (hygiene, in_loop, reactive,
manual, scheduled); every trigger goes through :func:`agent.compaction.compact`, which
calls the engine and persists its plan the same way.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field

from agent.tokens import PromptSize
from agent.types import (
    AgentSession,
    ChatMessage,
    CompactionPlan,
    CompactionStatus,
    ContextState,
    Trigger,
    Usage,
    UsageRecord,
)


@dataclass(frozen=True, slots=True)
class CompressionOutcome:
    """What :meth:`ContextEngine.compress` decided.

    ``plan`` is ``None`` when nothing changed (nothing to compress, or the attempt failed
    and the session must stay as it was); ``reason`` then says why.
    """

    plan: CompactionPlan | None
    status: CompactionStatus
    tokens_before: int
    tokens_after: int
    reason: str = ""
    summary_usage: tuple[UsageRecord, ...] = field(default_factory=tuple)


class ContextEngine(ABC):
    """Decides when a session's context must shrink and produces the plan that shrinks it."""

    name: str = "engine"

    @abstractmethod
    def should_compress(
        self,
        session: AgentSession,
        state: ContextState,
        prompt_tokens: int,
        *,
        trigger: Trigger = "in_loop",
    ) -> bool:
        """True when ``prompt_tokens`` calls for an automatic compaction under ``trigger``'s threshold."""

    @abstractmethod
    async def compress(
        self,
        session: AgentSession,
        messages: list[ChatMessage],
        state: ContextState,
        *,
        trigger: Trigger,
        focus: str | None = None,
        prompt_tokens: int | None = None,
        memory_index: str | None = None,
    ) -> CompressionOutcome:
        """Plan a compaction of ``messages`` (the persisted active view); updates ``state``.
        ``memory_index`` (what ``/memories`` holds) goes into a new summary, so durable notes
        stay in view after the turns that wrote them are archived."""

    def on_usage(self, session: AgentSession, state: ContextState, usage: Usage, prompt: PromptSize) -> None:
        """Learn from a real API-reported prompt size (calibration, anti-thrash); ``prompt`` is the
        rough size of the request it counted."""
        return None

    def on_failure(self, session: AgentSession, state: ContextState, reason: str) -> None:
        """A planned compaction could not be applied (the store refused it): count it as a failed
        attempt, so the next automatic trigger waits instead of trying again at once."""
        return None
