"""The model side as the settings ask for it: the provider, the context engine, each model's limits."""

from __future__ import annotations

from agent.context_engine import ContextEngine
from agent.engines.failopen import FailureSink
from agent.engines.hooks import load_hooks
from agent.engines.registry import EngineDeps, EngineUnavailable, build_engine
from agent.engines.strategies.base import UnknownStrategy
from agent.errors import ConfigError
from agent.llm import AnthropicProvider
from agent.memory_flush import MemoryFlush
from agent.offline import OfflineProvider
from agent.provider import LLMProvider
from agent.storage import ConversationStore
from agent.tokens import ModelInfo, model_info
from gateway.config import Settings


def build_provider(settings: Settings) -> LLMProvider:
    """The Anthropic provider when a key is configured, else the offline one (announced by the caller)."""
    if settings.offline or settings.anthropic_api_key is None:
        return OfflineProvider()
    return AnthropicProvider(
        api_key=settings.anthropic_api_key.get_secret_value(),
        base_url=settings.anthropic_base_url,
        settings=settings.llm,
    )


CACHE_TTL_SECONDS = {"5m": 300.0, "1h": 3600.0, "auto": 300.0}


def build_context_engine(
    settings: Settings,
    provider: LLMProvider,
    *,
    sink: FailureSink | None = None,
    store: ConversationStore | None = None,
) -> ContextEngine:
    """The engine ``context.engine`` names, with the configured hooks (and, given the store, the
    memory flush before each summary); an unknown name is a ConfigError whose one line lists the
    installed engines, a plugin that cannot be loaded or built one that names it and the cause."""
    deps = EngineDeps(
        compression=settings.compression,
        provider=provider,
        summary_model=settings.summary_model,
        prices=settings.model_prices or None,
        cache_ttl_seconds=CACHE_TTL_SECONDS[settings.prompt_caching.cache_ttl],
        breaker_fallback=settings.context.breaker_fallback,
        timeout_seconds=settings.context.timeout_seconds,
    )
    hooks = load_hooks(settings.hooks.as_config(), timeout_seconds=settings.hooks.timeout_seconds)
    if store is not None and settings.compression.memory_flush:
        # First: the notes it writes are there for every other hook and for the summary.
        flush = MemoryFlush(provider, store, settings.compression, prices=settings.model_prices or None)
        hooks.pre.insert(0, flush.as_hook())
    try:
        return build_engine(settings.context, deps, hooks=hooks, sink=sink)
    except (EngineUnavailable, UnknownStrategy) as exc:
        raise ConfigError(str(exc)) from None


def model_info_for(settings: Settings, model: str) -> ModelInfo:
    """The table entry of ``model`` with the ``models:`` section, ``model_prices`` and
    ``HYGIEIA_CONTEXT_WINDOW`` (the main model's window) applied."""
    override = settings.context_window if model == settings.model else None
    return model_info(
        model,
        context_window_override=override,
        prices=settings.model_prices or None,
        overrides=settings.models or None,
    )


def context_window_for(settings: Settings, model: str) -> int:
    """The window of ``model``; ``HYGIEIA_CONTEXT_WINDOW`` overrides the main model's."""
    return model_info_for(settings, model).context_window


def budget_for(settings: Settings, model: str) -> int | None:
    """The context budget of ``model``: its ``models:`` entry's, else ``compression.budget_tokens``
    (None: the whole window)."""
    info = model_info_for(settings, model)
    return info.budget_tokens if info.budget_set else settings.compression.budget_tokens
