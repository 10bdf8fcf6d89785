"""The seam every strategy of the default engine fits: one module per strategy, named in
``compression.strategies`` (cheapest first; a strategy left out is off).

A module ``agent.engines.strategies.<name>`` offers its strategy through ``build(settings)``
(or a class whose ``name`` is the module's name and has ``from_settings(settings)``); either may
return None when the strategy's own switch is off. Two kinds fit:

- a *plan* strategy (:class:`Strategy`) returns a :class:`CompressionOutcome` whose plan the
  store applies (after the validator), then the pipeline measures again;
- a *request* strategy edits the request instead of the store (``shape(session, request)``),
  learns from the response (``observe(state, response)``) and says what it will free
  (``expected_freed(session, view, prompt_tokens)``), so the dearer strategies after it are
  skipped when that is enough.
"""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

from agent.context_engine import CompressionOutcome
from agent.settings import CompressionSettings
from agent.types import AgentSession, ChatMessage, ContextState, Trigger

if TYPE_CHECKING:
    from agent.engines.hooks import CompactHooks
    from agent.provider import LLMProvider

PACKAGE = "agent.engines.strategies"


class UnknownStrategy(ValueError):
    """``compression.strategies`` names a strategy no module provides."""


class StrategyEngine(Protocol):
    """What a strategy may use of the engine running it (the cost-ordered compressor): the passes
    it shares, its breaker and hooks, the model side. A strategy names this, never the engine's
    class, so the pipeline and its steps do not import each other."""

    provider: LLMProvider
    prices: dict[str, tuple[float, float]] | None
    request_tools: list[dict[str, Any]]

    @property
    def breaker_fallback(self) -> str: ...

    @property
    def hooks(self) -> CompactHooks: ...

    def must_shrink_tokens(self, session: AgentSession) -> int: ...

    def breaker_is_open(self, state: ContextState) -> bool: ...

    async def prune_tool_output(
        self,
        session: AgentSession,
        messages: list[ChatMessage],
        state: ContextState,
        *,
        prompt_tokens: int | None = None,
        trigger: Trigger = "in_loop",
        strategy: str = "prune",
    ) -> CompressionOutcome: ...

    async def summarize(
        self,
        session: AgentSession,
        messages: list[ChatMessage],
        state: ContextState,
        *,
        trigger: Trigger,
        focus: str | None = None,
        prompt_tokens: int | None = None,
        memory_index: str | None = None,
    ) -> CompressionOutcome: ...

    async def slide(self, ctx: StrategyContext, *, strategy: str) -> CompressionOutcome: ...


@dataclass(frozen=True, slots=True)
class StrategyContext:
    """One pipeline step's inputs: the view as stored now, how small it must get, what is allowed."""

    engine: StrategyEngine
    session: AgentSession
    state: ContextState
    view: list[ChatMessage]
    trigger: Trigger
    size: int
    """The view's current prompt size (real tokens, best guess)."""
    goal: int
    """The size to get under; the pipeline stops once there."""
    llm_allowed: bool
    cold: bool
    """The cached prefix has expired (the gap since the last call is over the cache TTL)."""
    focus: str | None = None
    memory_index: str | None = None
    prompt_tokens: int | None = None


class Strategy(ABC):
    """A plan strategy: frees room by a plan the store applies."""

    name: ClassVar[str]
    needs_llm: ClassVar[bool] = False

    def runs_on(self, ctx: StrategyContext) -> bool:
        """Whether this strategy takes part in this step (its own trigger, its kind of compaction)."""
        return True

    @abstractmethod
    async def plan(self, ctx: StrategyContext) -> CompressionOutcome | None:
        """The outcome (with or without a plan), or None when there is nothing for it to do."""


@runtime_checkable
class RequestStrategy(Protocol):
    """A request strategy (see the module docstring)."""

    name: ClassVar[str]

    def shape(self, session: AgentSession, request: Any) -> Any: ...

    def observe(self, state: ContextState, response: Any) -> int: ...

    def expected_freed(
        self, session: AgentSession, view: Sequence[ChatMessage], prompt_tokens: int
    ) -> int: ...


def load_strategy(name: str, settings: CompressionSettings) -> Strategy | RequestStrategy | None:
    """The strategy named ``name`` as configured (None: its own switch is off)."""
    if not name.isidentifier() or name == "base":
        raise UnknownStrategy(f"unknown context strategy {name!r}")
    try:
        module = importlib.import_module(f"{PACKAGE}.{name}")
    except ModuleNotFoundError as exc:
        if exc.name != f"{PACKAGE}.{name}":
            raise
        raise UnknownStrategy(f"unknown context strategy {name!r}") from None
    build = getattr(module, "build", None)
    if callable(build):
        built: Strategy | RequestStrategy | None = build(settings)
        return built
    for value in vars(module).values():
        if (
            isinstance(value, type)
            and getattr(value, "name", None) == name
            and hasattr(value, "from_settings")
        ):
            made: Strategy | RequestStrategy | None = value.from_settings(settings)
            return made
    raise UnknownStrategy(f"module {module.__name__} offers no strategy named {name!r}")
