"""Fail open, never wedge: a context engine that raises, hangs or plans something invalid is
logged and counted, and the built-in compressor serves that call in its place.

:class:`FailOpen` wraps the configured engine. Async work (a compaction step) is bounded by
``timeout_seconds``; every plan and every projection is checked with :mod:`agent.context_plan`
before it is used. The observation hooks (usage, turn complete) are best-effort: a failure there
is logged and counted, never raised into the turn.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

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
        try:
            return self.primary.should_compress(session, state, prompt_tokens, trigger=trigger)
        except Exception as exc:
            self._report(session, self._failure(session, "should_compress", "raised", repr(exc)))
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
                try:
                    outcome = await asyncio.wait_for(work, self.timeout_seconds)
                except StopAsyncIteration:
                    return
                except TimeoutError:
                    failure = self._failure(
                        session, "compress", "timeout", f"no plan within {self.timeout_seconds:g} s"
                    )
                    break
                except Exception as exc:
                    failure = self._failure(session, "compress", "raised", repr(exc))
                    break
                if outcome.plan is not None:
                    problems = validate_plan(session, state, view, outcome.plan)
                    if problems:
                        failure = self._failure(session, "compress", "invalid", "; ".join(problems))
                        break
                sent = yield outcome
                view = sent
        finally:
            await steps.aclose()
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
        try:
            outcome = await asyncio.wait_for(
                self.primary.prune_tool_output(session, messages, state), self.timeout_seconds
            )
        except Exception as exc:
            kind: EngineFailureKind = "timeout" if isinstance(exc, TimeoutError) else "raised"
            failure = self._failure(session, "prune_tool_output", kind, repr(exc))
        else:
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
        try:
            chosen = self.primary.select_context(session, state, messages)
        except Exception as exc:
            self._report(session, self._failure(session, "select_context", "raised", repr(exc)))
            return self.fallback.select_context(session, state, messages)
        problems = validate_projection(session, state, messages, chosen)
        if problems:
            failure = self._failure(session, "select_context", "invalid", "; ".join(problems))
            self._report(session, failure)
            return self.fallback.select_context(session, state, messages)
        return chosen

    def shape_request(self, session: AgentSession, state: ContextState, request: LLMRequest) -> LLMRequest:
        # A plugin may add server-side edits, never change what is said: a shaped request with other
        # messages, system or tools is refused like an invalid projection.
        try:
            shaped = self.primary.shape_request(session, state, request)
        except Exception as exc:
            self._report(session, self._failure(session, "shape_request", "raised", repr(exc)))
            return self.fallback.shape_request(session, state, request)
        changed = [
            name
            for name in ("model", "messages", "system", "tools", "purpose")
            if getattr(shaped, name) != getattr(request, name)
        ]
        if changed:
            reason = "the shaped request changes " + ", ".join(changed)
            self._report(session, self._failure(session, "shape_request", "invalid", reason))
            return self.fallback.shape_request(session, state, request)
        return shaped

    # ---- observations ----------------------------------------------------------------------

    def on_turn_complete(
        self, session: AgentSession, state: ContextState, messages: Sequence[ChatMessage]
    ) -> None:
        try:
            self.primary.on_turn_complete(session, state, messages)
        except Exception as exc:
            self._report(session, self._failure(session, "on_turn_complete", "raised", repr(exc)))

    def on_response(
        self, session: AgentSession, state: ContextState, response: LLMResponse
    ) -> Sequence[StrategyRun]:
        try:
            return tuple(self.primary.on_response(session, state, response))
        except Exception as exc:
            self._report(session, self._failure(session, "on_response", "raised", repr(exc)))
            return ()

    def on_usage(self, session: AgentSession, state: ContextState, usage: Usage, prompt: PromptSize) -> None:
        try:
            self.primary.on_usage(session, state, usage, prompt)
        except Exception as exc:
            self._report(session, self._failure(session, "on_usage", "raised", repr(exc)))
            self.fallback.on_usage(session, state, usage, prompt)

    def on_failure(self, session: AgentSession, state: ContextState, reason: str) -> None:
        try:
            self.primary.on_failure(session, state, reason)
        except Exception as exc:
            self._report(session, self._failure(session, "on_failure", "raised", repr(exc)))

    def tools(self) -> Sequence[Tool]:
        try:
            return tuple(self.primary.tools())
        except Exception as exc:
            self._report(None, self._failure(None, "tools", "raised", repr(exc)))
            return ()
