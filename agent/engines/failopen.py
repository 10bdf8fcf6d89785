"""Fail open, never wedge: a context engine that raises, hangs or plans something invalid is
logged and counted, and the built-in compressor serves that call in its place.

:class:`FailOpen` wraps the configured engine. Async work (a compaction step) is bounded by
``timeout_seconds``; every plan and every projection is checked with :mod:`agent.context_plan`
before it is used. The observation hooks (usage, turn complete) are best-effort: a failure there
is logged and counted, never raised into the turn.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, TypeVar

from agent.bounded import Done, Failed, bounded_await, guarded
from agent.context_engine import CompressionOutcome, CompressionSteps, ContextEngine
from agent.context_plan import validate_plan, validate_projection
from agent.engines.hooks import CompactHooks
from agent.provider import LLMRequest, LLMResponse
from agent.tokens import PromptSize
from agent.types import (
    AgentSession,
    ChatMessage,
    ContextState,
    EngineFailure,
    EngineFailureKind,
    StrategyRun,
    Trigger,
    Usage,
)

if TYPE_CHECKING:
    from agent.tools.base import Tool

_log = logging.getLogger(__name__)

T = TypeVar("T")

# What a plugin's shape_request may change: server-side edits and caching, never what is said,
# how long the answer may be, how it is sampled or whether the model thinks.
SHAPEABLE = frozenset({"context_management", "compaction", "betas", "cache_control"})

FailureSink = Callable[[str | None, EngineFailure], Awaitable[None]]


class FailOpen(ContextEngine):
    """``primary`` guarded by ``fallback`` (the built-in); see the module docstring."""

    def __init__(
        self,
        primary: ContextEngine,
        fallback: ContextEngine,
        *,
        timeout_seconds: float,
        sink: FailureSink | None = None,
    ) -> None:
        self.primary = primary
        self.fallback = fallback
        self.timeout_seconds = timeout_seconds
        self.sink = sink
        self.name = primary.name
        self.shares_state = primary.shares_state
        self._pending: set[asyncio.Task[None]] = set()

    @property
    def hooks(self) -> CompactHooks:
        return self.primary.hooks

    @hooks.setter
    def hooks(self, value: CompactHooks) -> None:
        self.primary.hooks = value
        self.fallback.hooks = value

    # ---- bookkeeping -----------------------------------------------------------------------

    def _failure(
        self, session: AgentSession | None, operation: str, kind: EngineFailureKind, reason: str
    ) -> EngineFailure:
        failure = EngineFailure(self.primary.name, operation, kind, reason)
        _log.error(
            "context engine %s failed (%s, %s): %s; the built-in serves this call",
            self.primary.name,
            operation,
            kind,
            reason,
            extra={"session": session.id if session else None, "engine": self.primary.name},
        )
        return failure

    def _failed(self, session: AgentSession | None, operation: str, failed: Failed) -> EngineFailure:
        kind: EngineFailureKind = "timeout" if failed.kind == "timeout" else "raised"
        return self._failure(session, operation, kind, failed.reason)

    def _sync(
        self, session: AgentSession | None, operation: str, call: Callable[..., T], *args: Any
    ) -> Done[T] | None:
        """``call(*args)`` guarded; None when it failed (reported)."""
        outcome = guarded(call, *args)
        if isinstance(outcome, Failed):
            self._report(session, self._failed(session, operation, outcome))
            return None
        return outcome

    def _report(self, session: AgentSession | None, failure: EngineFailure) -> None:
        """Count a failure from a synchronous method (no outcome carries it): stored off the turn."""
        if self.sink is None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        task = loop.create_task(self._store(session.id if session else None, failure))
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def _store(self, session_id: str | None, failure: EngineFailure) -> None:
        assert self.sink is not None
        try:
            await self.sink(session_id, failure)
        except Exception:
            _log.exception("could not record a context engine failure")

    # ---- when ------------------------------------------------------------------------------

    def should_compress(
        self, session: AgentSession, state: ContextState, prompt_tokens: int, *, trigger: Trigger = "in_loop"
    ) -> bool:
        answer = self._sync(
            session,
            "should_compress",
            lambda: self.primary.should_compress(session, state, prompt_tokens, trigger=trigger),
        )
        if answer is not None:
            return answer.value
        return self.fallback.should_compress(session, state, prompt_tokens, trigger=trigger)

    # ---- how -------------------------------------------------------------------------------

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
        steps = self.compress_steps(
            session,
            messages,
            state,
            trigger=trigger,
            focus=focus,
            prompt_tokens=prompt_tokens,
            memory_index=memory_index,
        )
        try:
            return await anext(steps)
        finally:
            await steps.aclose()

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
        kwargs = {
            "trigger": trigger,
            "focus": focus,
            "prompt_tokens": prompt_tokens,
            "memory_index": memory_index,
        }
        view = messages
        steps = self.primary.compress_steps(session, view, state, **kwargs)  # type: ignore[arg-type]
        sent: list[ChatMessage] | None = None
        failure: EngineFailure | None = None
        try:
            while True:
                work = anext(steps) if sent is None else steps.asend(sent)
                step = await bounded_await(work, self.timeout_seconds)
                if isinstance(step, Failed):
                    if isinstance(step.error, StopAsyncIteration):
                        return
                    failure = self._failed(session, "compress", step)
                    break
                outcome = step.value
                if outcome.plan is not None:
                    problems = validate_plan(session, state, view, outcome.plan)
                    if problems:
                        failure = self._failure(session, "compress", "invalid", "; ".join(problems))
                        break
                sent = yield outcome
                view = sent
        finally:
            closed = await bounded_await(steps.aclose(), self.timeout_seconds)
            if isinstance(closed, Failed):
                _log.warning("context engine %s could not be closed: %s", self.primary.name, closed.reason)
        # The built-in serves the rest of this compaction, from the view as it now stands.
        served = self.fallback.compress_steps(session, view, state, **kwargs)  # type: ignore[arg-type]
        try:
            outcome = await anext(served)
            outcome = replace(outcome, engine_failures=(*outcome.engine_failures, failure))
            while True:
                sent = yield outcome
                try:
                    outcome = await served.asend(sent)
                except StopAsyncIteration:
                    return
        except StopAsyncIteration:
            return
        finally:
            await served.aclose()

    async def prune_tool_output(
        self, session: AgentSession, messages: list[ChatMessage], state: ContextState
    ) -> CompressionOutcome | None:
        pruned = await bounded_await(
            self.primary.prune_tool_output(session, messages, state), self.timeout_seconds
        )
        if isinstance(pruned, Failed):
            failure = self._failed(session, "prune_tool_output", pruned)
        else:
            outcome = pruned.value
            if outcome is None or outcome.plan is None:
                return outcome
            problems = validate_plan(session, state, messages, outcome.plan)
            if not problems:
                return outcome
            failure = self._failure(session, "prune_tool_output", "invalid", "; ".join(problems))
        served = await self.fallback.prune_tool_output(session, messages, state)
        if served is None:
            return CompressionOutcome(None, "failed", 0, 0, reason=failure.reason, engine_failures=(failure,))
        return replace(served, engine_failures=(*served.engine_failures, failure))

    def select_context(
        self, session: AgentSession, state: ContextState, messages: Sequence[ChatMessage]
    ) -> list[ChatMessage]:
        answer = self._sync(session, "select_context", self.primary.select_context, session, state, messages)
        if answer is None:
            return self.fallback.select_context(session, state, messages)
        chosen = answer.value
        problems = validate_projection(session, state, messages, chosen)
        if problems:
            failure = self._failure(session, "select_context", "invalid", "; ".join(problems))
            self._report(session, failure)
            return self.fallback.select_context(session, state, messages)
        return chosen

    def shape_request(self, session: AgentSession, state: ContextState, request: LLMRequest) -> LLMRequest:
        # A plugin may add server-side edits, never change what is said or how it is answered: a
        # shaped request that changes anything but SHAPEABLE is refused like an invalid projection.
        answer = self._sync(session, "shape_request", self.primary.shape_request, session, state, request)
        if answer is None:
            return self.fallback.shape_request(session, state, request)
        shaped = answer.value
        changed = _changed(request, shaped)
        if changed:
            reason = "the shaped request changes " + ", ".join(changed)
            self._report(session, self._failure(session, "shape_request", "invalid", reason))
            return self.fallback.shape_request(session, state, request)
        return shaped

    # ---- observations ----------------------------------------------------------------------

    def on_turn_complete(
        self, session: AgentSession, state: ContextState, messages: Sequence[ChatMessage]
    ) -> None:
        self._sync(session, "on_turn_complete", self.primary.on_turn_complete, session, state, messages)

    def on_response(
        self, session: AgentSession, state: ContextState, response: LLMResponse
    ) -> Sequence[StrategyRun]:
        answer = self._sync(
            session, "on_response", lambda: tuple(self.primary.on_response(session, state, response))
        )
        return answer.value if answer is not None else ()

    def on_usage(self, session: AgentSession, state: ContextState, usage: Usage, prompt: PromptSize) -> None:
        if self._sync(session, "on_usage", self.primary.on_usage, session, state, usage, prompt) is None:
            self.fallback.on_usage(session, state, usage, prompt)

    def on_failure(self, session: AgentSession, state: ContextState, reason: str) -> None:
        self._sync(session, "on_failure", self.primary.on_failure, session, state, reason)

    def tools(self) -> Sequence[Tool]:
        answer = self._sync(None, "tools", lambda: tuple(self.primary.tools()))
        return answer.value if answer is not None else ()


def _changed(request: LLMRequest, shaped: object) -> list[str]:
    """The fields ``shaped`` changes that a plugin may not change (every field, when it is not a request)."""
    fields = [f.name for f in dataclasses.fields(LLMRequest)]
    if not isinstance(shaped, LLMRequest):
        return ["the request itself (not an LLMRequest)"]
    return [
        name for name in fields if name not in SHAPEABLE and getattr(shaped, name) != getattr(request, name)
    ]
