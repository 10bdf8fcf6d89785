"""The pluggable context engine: decides when to compress and how.

Compression is one operation with several triggers (hygiene, in_loop, reactive,
manual, scheduled); every trigger goes through :func:`agent.compaction.compact`, which
calls the engine and persists its plan the same way.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from agent.engines.hooks import CompactHooks
from agent.provider import LLMRequest, LLMResponse
from agent.tokens import PromptSize
from agent.types import (
    AgentSession,
    ChatMessage,
    CompactionPlan,
    CompactionStatus,
    ContextState,
    EngineFailure,
    StrategyRun,
    Trigger,
    Usage,
    UsageRecord,
)

if TYPE_CHECKING:
    from agent.tools.base import Tool

# Steps of one compaction: each yields a plan; what is sent back is the active view once it is stored.
CompressionSteps = AsyncGenerator["CompressionOutcome", list[ChatMessage]]


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
    strategy: str = ""
    """The strategy that produced ``plan`` (or, with none, the last one tried)."""
    engine_failures: tuple[EngineFailure, ...] = ()
    """Engines that failed while this outcome was made (the built-in then served): to be counted."""
    vetoed: bool = False
    """A pre_compact hook vetoed it (the in-loop trigger then rests: agent.engines.veto_rest)."""


class ContextEngine(ABC):
    """Decides when a session's context must shrink and produces the plan that shrinks it.

    An engine never writes: :func:`agent.compaction.compact` checks every plan with
    :func:`agent.context_plan.validate_plan` and has the store apply it. One instance serves one
    session unless ``shares_state`` says it keeps nothing per session (the built-ins keep their
    bookkeeping in :class:`ContextState`, which is persisted per session).
    """

    name: str = "engine"
    shares_state: bool = False
    """True: one instance may serve every session (it keeps no per-session state of its own)."""

    @property
    def hooks(self) -> CompactHooks:
        """pre_compact / post_compact hooks (set by whoever builds the engine; none by default)."""
        hooks = self.__dict__.get("_hooks")
        if not isinstance(hooks, CompactHooks):
            hooks = self.__dict__["_hooks"] = CompactHooks()
        return hooks

    @hooks.setter
    def hooks(self, value: CompactHooks) -> None:
        self.__dict__["_hooks"] = value

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

    async def compress_steps(
        self,
        session: AgentSession,
        messages: list[ChatMessage],
        state: ContextState,
        *,
        trigger: Trigger,
        focus: str | None = None,
        prompt_tokens: int | None = None,
        memory_index: str | None = None,
    ) -> CompressionSteps:
        """The compaction as a series of plans, cheapest first: each yielded plan is applied, and
        the stored active view is sent back before the next step is asked for. An engine stops
        (returns) once the view is under its target; the default is one step, :meth:`compress`."""
        yield await self.compress(
            session,
            messages,
            state,
            trigger=trigger,
            focus=focus,
            prompt_tokens=prompt_tokens,
            memory_index=memory_index,
        )

    async def prune_tool_output(
        self, session: AgentSession, messages: list[ChatMessage], state: ContextState
    ) -> CompressionOutcome | None:
        """The cheap pass: old tool output only, no model call. None: the engine has none."""
        return None

    def select_context(
        self, session: AgentSession, state: ContextState, messages: Sequence[ChatMessage]
    ) -> list[ChatMessage]:
        """The messages to SEND for this call (a projection of the stored view: nothing stored
        changes). The default sends the view as it is."""
        return list(messages)

    def on_turn_complete(
        self, session: AgentSession, state: ContextState, messages: Sequence[ChatMessage]
    ) -> None:
        """Observe a finished turn (its final active view)."""
        return None

    def shape_request(self, session: AgentSession, state: ContextState, request: LLMRequest) -> LLMRequest:
        """The request as it goes out (server-side strategies add their edits); default unchanged."""
        return request

    def on_response(
        self, session: AgentSession, state: ContextState, response: LLMResponse
    ) -> Sequence[StrategyRun]:
        """Observe a chat response; what a server-side strategy freed in it comes back as runs
        (the loop has the store keep them, for ``/metrics`` and ``/context``)."""
        return ()

    def tools(self) -> Sequence[Tool]:
        """Tools this engine gives the agent (none by default)."""
        return ()

    def on_usage(self, session: AgentSession, state: ContextState, usage: Usage, prompt: PromptSize) -> None:
        """Learn from a real API-reported prompt size (calibration, anti-thrash); ``prompt`` is the
        rough size of the request it counted. Never called with usage a provider only estimated."""
        return None

    def on_failure(self, session: AgentSession, state: ContextState, reason: str) -> None:
        """A planned compaction could not be applied (the store refused it): count it as a failed
        attempt, so the next automatic trigger waits instead of trying again at once."""
        return None
