"""The ``delegate`` tool: a sub-agent runs a task in a session of its own; only its answer returns.

The sub-agent is the same loop with the same tools (minus ``delegate``: no recursion), its own
limits (turns, total tokens, wall time) and a fresh context: the task and the context it was
given. Its transcript is stored as its own session, linked to the chat, archived once it ends;
its usage is charged to the chat (:mod:`agent.tools.delegate.ledger`). Cancelling the chat's
turn cancels it: the sub-agent runs inside the tool call the turn awaits.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from agent.context_engine import ContextEngine
from agent.errors import LLMError
from agent.loop import AgentLoop
from agent.prompts import SUBAGENT_SYSTEM
from agent.provider import LLMProvider
from agent.settings import LLMSettings, ModelSpec, PromptCachingSettings
from agent.tokens import model_info
from agent.tools.base import JSONObject, Tool, ToolContext, ToolOutput
from agent.tools.delegate.budget import BudgetedProvider, BudgetSpent
from agent.tools.delegate.ledger import LedgerStore
from agent.tools.registry import ToolRegistry
from agent.tools.scope import ToolScope
from agent.types import AgentSession, ChatMessage

_log = logging.getLogger(__name__)

DELEGATE = "delegate"


@dataclass(frozen=True, slots=True)
class DelegationLimits:
    """A sub-agent's own limits (``delegation:`` in the config)."""

    max_turns: int = 12
    max_tokens: int = 100_000
    timeout_seconds: float = 300.0
    model: str | None = None
    """None: the chat's model."""


@dataclass(frozen=True, slots=True)
class SubAgentParts:
    """What a sub-agent's loop is made of: the chat loop's own parts, handed in by the builder.
    ``tools`` is the chat's registry (read at each call, so tools added later are offered too)."""

    provider: LLMProvider
    engine: ContextEngine
    tools: ToolRegistry
    llm: LLMSettings
    caching: PromptCachingSettings
    prices: dict[str, tuple[float, float]] | None = None
    models: Mapping[str, ModelSpec] | None = None


SCHEMA: JSONObject = {
    "type": "object",
    "properties": {
        "task": {
            "type": "string",
            "description": "The task, self-contained: what to find or do and what to report back.",
        },
        "context": {
            "type": "string",
            "description": "Facts from this conversation the sub-agent needs (it sees nothing else).",
        },
    },
    "required": ["task"],
}


@dataclass(slots=True)
class _Run:
    """How a sub-agent's run ended: its answer and what it spent."""

    text: str
    note: str
    tokens: int
    calls: int
    tools: Counter[str]

    def output(self) -> ToolOutput:
        used = ", ".join(f"{name} x{n}" for name, n in sorted(self.tools.items())) or "none"
        trailer = f"[sub-agent: {self.tokens} tokens over {self.calls} calls; tools called: {used}"
        trailer += f"; {self.note}]" if self.note else "]"
        body = self.text or "(the sub-agent gave no answer)"
        return ToolOutput(f"{body}\n\n{trailer}", is_error=not self.text)


class DelegateTool(Tool):
    """Runs a sub-agent; returns its final text with a short trailer (tokens, tools called)."""

    name = DELEGATE
    description = (
        "Hand a self-contained task (research, reading many files or long search results) to a "
        "sub-agent with a fresh context and the same tools. Only its final answer comes back, so "
        "large reads do not fill this conversation. Give it everything it needs in task and context: "
        "it cannot see this conversation."
    )
    input_schema = SCHEMA

    def __init__(self, parts: SubAgentParts, limits: DelegationLimits | None = None) -> None:
        self._parts = parts
        self._limits = limits or DelegationLimits()

    def _tools(self, ctx: ToolContext) -> ToolRegistry:
        """The chat's registered tools and the per-chat ones its turn was offered, minus ``delegate``;
        per-chat tools stay a source, so a large catalog is deferred for the sub-agent too."""
        chat = self._parts.tools
        found = (chat.get(name) for name in chat.names if name != DELEGATE)
        registry = ToolRegistry((tool for tool in found if tool is not None), deferral=chat.deferral)
        extra = {n: t for n, t in (ctx.offered or {}).items() if n not in chat and n != DELEGATE}
        if extra:
            registry.add_source(_Offered(tuple(extra.values())))
        return registry

    def _session(self, ctx: ToolContext, child_id: str, model: str) -> AgentSession:
        parent = ctx.session
        window = parent.context_window
        if model != parent.model:
            window = model_info(model, prices=self._parts.prices, overrides=self._parts.models).context_window
        # The chat's key and platform: a reminder the sub-agent sets reaches the chat.
        return AgentSession(
            id=child_id,
            system_prompt=SUBAGENT_SYSTEM,
            model=model,
            context_window=window,
            key=parent.key,
            platform=parent.platform,
        )

    async def run(self, ctx: ToolContext, tool_input: JSONObject) -> ToolOutput:
        task = str(tool_input["task"]).strip()
        context = str(tool_input.get("context", "")).strip()
        if not task:
            return ToolOutput.error("task is empty: say what the sub-agent should do")
        limits = self._limits
        model = limits.model or ctx.session.model
        child_id = await ctx.store.open_delegation(ctx.session.id, model=model, system_prompt=SUBAGENT_SYSTEM)
        provider = BudgetedProvider(self._parts.provider, limits.max_tokens)
        store = LedgerStore(ctx.store, ctx.session.id)
        loop = AgentLoop(
            provider,
            store,
            self._parts.engine,
            llm=self._parts.llm.model_copy(update={"max_tool_iterations": limits.max_turns}),
            caching=self._parts.caching,
            tools=self._tools(ctx),
            prices=self._parts.prices,
            models=self._parts.models,
            clock=ctx.clock,
        )
        text = task if not context else f"{task}\n\nContext:\n{context}"
        session = self._session(ctx, child_id, model)
        outcome = "failed"
        try:
            note = ""
            try:
                async with asyncio.timeout(limits.timeout_seconds):
                    result = await loop.run_turn(
                        session, [], message=ChatMessage.user(text), memory_scope=ctx.memory_scope
                    )
                outcome = "done"
                if result.stopped == "iteration_cap":
                    outcome, note = (
                        "max_turns",
                        f"stopped at max_turns ({limits.max_turns}): answer may be partial",
                    )
            except BudgetSpent:
                outcome = "max_tokens"
                note = f"stopped at max_tokens ({limits.max_tokens}): answer may be partial"
            except TimeoutError:
                outcome = "timeout"
                note = f"stopped at the timeout ({limits.timeout_seconds:g} s): answer may be partial"
            except LLMError as exc:
                note = f"the model failed: {exc}"
            return await self._finish(store, child_id, provider, note)
        except asyncio.CancelledError:
            outcome = "cancelled"
            raise
        finally:
            # Shielded: a /stop must not leave the sub-agent's session looking live.
            await asyncio.shield(ctx.store.close_delegation(child_id, outcome))
            _log.info(
                "sub-agent %s ended: %s, %d tokens over %d calls",
                child_id,
                outcome,
                provider.used,
                provider.calls,
                extra={"session": ctx.session.id},
            )

    async def _finish(
        self, store: LedgerStore, child_id: str, provider: BudgetedProvider, note: str
    ) -> ToolOutput:
        messages = await store.load_active(child_id)
        tools: Counter[str] = Counter(
            str(b.get("name", ""))
            for m in messages
            if m.role == "assistant"
            for b in m.content
            if b.get("type") == "tool_use"
        )
        return _Run(_answer(messages), note, provider.used, provider.calls, tools).output()


def _answer(messages: list[ChatMessage]) -> str:
    """The sub-agent's last words: its last assistant text that is not one of our notices."""
    for message in reversed(messages):
        if message.role != "assistant" or message.kind != "message":
            continue
        text = "\n".join(str(b.get("text", "")) for b in message.content if b.get("type") == "text").strip()
        if text:
            return text
    return ""


@dataclass(frozen=True, slots=True)
class _Offered:
    """The per-chat tools a chat's turn was offered, handed on as they are (the chat's scope already
    chose them)."""

    tools: tuple[Tool, ...]

    def tools_for(self, scope: ToolScope) -> Sequence[Tool]:
        return self.tools
