"""Which context engine runs: named by ``context.engine``, built-in or a plugin.

Built-ins are ``compressor`` (the cost-ordered pipeline) and ``sliding`` (no LLM). Third-party
engines register under the entry-point group ``hygieia.context_engines``: the entry point loads a
callable taking :class:`EngineDeps` and returning a :class:`ContextEngine` (an engine class whose
constructor takes the deps will do). A plugin is only ever loaded when it is named. Whatever is
named is wrapped in :class:`FailOpen` with the built-in compressor behind it, and given one
instance per session unless it declares ``shares_state``.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from importlib.metadata import EntryPoint, entry_points
from typing import TYPE_CHECKING, Literal

from agent.bounded import Failed, guarded
from agent.clock import utcnow
from agent.context_engine import CompressionOutcome, CompressionSteps, ContextEngine
from agent.engines.compressor.pipeline import CostOrderedCompressor
from agent.engines.failopen import FailOpen, FailureSink
from agent.engines.hooks import CompactHooks
from agent.engines.sliding import SlidingEngine
from agent.provider import LLMProvider, LLMRequest, LLMResponse
from agent.settings import CompressionSettings, ContextSettings
from agent.tokens import PromptSize
from agent.types import AgentSession, ChatMessage, ContextState, StrategyRun, Trigger, Usage

if TYPE_CHECKING:
    from agent.tools.base import Tool

_log = logging.getLogger(__name__)

ENGINES_GROUP = "hygieia.context_engines"
BUILTIN_ENGINES = ("compressor", "sliding")
# Per-session instances kept for engines that hold state of their own (least recently used go).
MAX_SESSION_ENGINES = 4096


class EngineUnavailable(ValueError):
    """The engine ``context.engine`` names cannot serve; the message says why in one line."""


class UnknownEngine(EngineUnavailable):
    """``context.engine`` names no installed engine; the message lists the installed ones."""


class BrokenEngine(EngineUnavailable):
    """A plugin engine whose import fails or exits, or whose factory fails or returns something
    other than a :class:`ContextEngine`; the message names the plugin and the cause."""


@dataclass(frozen=True, slots=True)
class EngineDeps:
    """What an engine may be built from."""

    compression: CompressionSettings
    provider: LLMProvider
    summary_model: str
    prices: dict[str, tuple[float, float]] | None = None
    cache_ttl_seconds: float = 300.0
    breaker_fallback: Literal["extractive", "sliding"] = "extractive"
    clock: Callable[[], datetime] = field(default=utcnow)
    timeout_seconds: float | None = None
    """``context.timeout_seconds``: the built-in compressor's own outer limit per step."""


EngineFactory = Callable[[EngineDeps], ContextEngine]


def _compressor(deps: EngineDeps) -> ContextEngine:
    return CostOrderedCompressor(
        deps.compression,
        deps.provider,
        summary_model=deps.summary_model,
        clock=deps.clock,
        prices=deps.prices,
        cache_ttl_seconds=deps.cache_ttl_seconds,
        breaker_fallback=deps.breaker_fallback,
        timeout_seconds=deps.timeout_seconds,
    )


def _sliding(deps: EngineDeps) -> ContextEngine:
    return SlidingEngine(deps.compression, clock=deps.clock)


_BUILTINS: dict[str, EngineFactory] = {"compressor": _compressor, "sliding": _sliding}


def _plugins() -> dict[str, EntryPoint]:
    # A plugin cannot take a built-in's name: the built-ins are what fail-open falls back to.
    return {ep.name: ep for ep in entry_points(group=ENGINES_GROUP) if ep.name not in _BUILTINS}


def installed_engines() -> list[str]:
    """Every engine that can be named: the built-ins, then the plugins (sorted)."""
    return [*BUILTIN_ENGINES, *sorted(_plugins())]


def unknown_engine_message(name: str) -> str:
    installed = ", ".join(installed_engines())
    return f"unknown context engine {name!r} (context.engine); installed engines: {installed}"


def check_engine_name(name: str) -> None:
    """Raise :class:`UnknownEngine` (one line listing the installed engines) for an unknown name."""
    if name not in _BUILTINS and name not in _plugins():
        raise UnknownEngine(unknown_engine_message(name))


def engine_factory(name: str) -> EngineFactory:
    """The factory of the engine ``name`` (a plugin's entry point is loaded only here)."""
    if name in _BUILTINS:
        return _BUILTINS[name]
    plugin = _plugins().get(name)
    if plugin is None:
        raise UnknownEngine(unknown_engine_message(name))
    # A plugin's import is code we do not own: whatever it raises (an exit included) is one line.
    loaded = guarded(plugin.load)
    if isinstance(loaded, Failed):
        raise BrokenEngine(f"context engine {name!r} ({plugin.value}) cannot be loaded: {loaded.reason}")
    if not callable(loaded.value):
        raise BrokenEngine(f"context engine {name!r} ({plugin.value}) is not callable")
    factory: EngineFactory = loaded.value
    return factory


class PerSession(ContextEngine):
    """One instance of an engine per session (built on first use), for engines with state of
    their own; observations and plans go to that session's instance."""

    def __init__(self, factory: Callable[[], ContextEngine], first: ContextEngine) -> None:
        self._factory = factory
        self._first: ContextEngine | None = first
        self._by_session: OrderedDict[str, ContextEngine] = OrderedDict()
        self.name = first.name
        self._hooks = first.hooks

    @property
    def hooks(self) -> CompactHooks:
        return self._hooks

    @hooks.setter
    def hooks(self, value: CompactHooks) -> None:
        self._hooks = value
        for engine in self._by_session.values():
            engine.hooks = value
        if self._first is not None:
            self._first.hooks = value

    def for_session(self, session_id: str) -> ContextEngine:
        engine = self._by_session.get(session_id)
        if engine is None:
            engine, self._first = (self._first or self._factory()), None
            engine.hooks = self._hooks
            self._by_session[session_id] = engine
            if len(self._by_session) > MAX_SESSION_ENGINES:
                self._by_session.popitem(last=False)
        else:
            self._by_session.move_to_end(session_id)
        return engine

    def should_compress(
        self, session: AgentSession, state: ContextState, prompt_tokens: int, *, trigger: Trigger = "in_loop"
    ) -> bool:
        return self.for_session(session.id).should_compress(session, state, prompt_tokens, trigger=trigger)

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
        return await self.for_session(session.id).compress(
            session,
            messages,
            state,
            trigger=trigger,
            focus=focus,
            prompt_tokens=prompt_tokens,
            memory_index=memory_index,
        )

    def compress_steps(
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
        return self.for_session(session.id).compress_steps(
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
        return await self.for_session(session.id).prune_tool_output(session, messages, state)

    def select_context(
        self, session: AgentSession, state: ContextState, messages: Sequence[ChatMessage]
    ) -> list[ChatMessage]:
        return self.for_session(session.id).select_context(session, state, messages)

    def shape_request(self, session: AgentSession, state: ContextState, request: LLMRequest) -> LLMRequest:
        return self.for_session(session.id).shape_request(session, state, request)

    def on_response(
        self, session: AgentSession, state: ContextState, response: LLMResponse
    ) -> Sequence[StrategyRun]:
        return self.for_session(session.id).on_response(session, state, response)

    def on_turn_complete(
        self, session: AgentSession, state: ContextState, messages: Sequence[ChatMessage]
    ) -> None:
        self.for_session(session.id).on_turn_complete(session, state, messages)

    def on_usage(self, session: AgentSession, state: ContextState, usage: Usage, prompt: PromptSize) -> None:
        self.for_session(session.id).on_usage(session, state, usage, prompt)

    def on_failure(self, session: AgentSession, state: ContextState, reason: str) -> None:
        self.for_session(session.id).on_failure(session, state, reason)

    def tools(self) -> Sequence[Tool]:
        # Tools are registered once for every session: the first instance's stand for all.
        probe = self._first or next(iter(self._by_session.values()), None)
        return probe.tools() if probe is not None else ()


def build_engine(
    context: ContextSettings,
    deps: EngineDeps,
    *,
    hooks: CompactHooks | None = None,
    sink: FailureSink | None = None,
) -> ContextEngine:
    """The engine ``context.engine`` names, ready to serve: per session unless it shares state,
    behind :class:`FailOpen` unless it is the built-in compressor itself. Raises
    :class:`UnknownEngine` for an unknown name, :class:`BrokenEngine` for a plugin that cannot be
    loaded or built."""
    name = context.engine
    factory = engine_factory(name)
    hooks = hooks or CompactHooks()

    def make() -> ContextEngine:
        engine = factory(deps)
        if not isinstance(engine, ContextEngine):
            raise TypeError(f"its factory returned {type(engine).__name__}, not a ContextEngine")
        return engine

    built = guarded(make)
    if isinstance(built, Failed):
        raise BrokenEngine(f"context engine {name!r} cannot be built: {built.reason}")
    first = built.value
    engine: ContextEngine = first if first.shares_state else PerSession(make, first)
    engine.hooks = hooks
    if name == "compressor":
        return engine
    fallback = _compressor(deps)
    served = FailOpen(engine, fallback, timeout_seconds=context.timeout_seconds, sink=sink)
    served.hooks = hooks
    _log.info("context engine %s (the built-in compressor serves when it fails)", name)
    return served
