"""Cold-cache prune (no call): when the gap since the last call already exceeds the cache TTL,
the cached prefix is gone anyway, so old tool output is pruned before the call at no cache cost
(on a warm cache the same prune would rewrite the cached prefix and pay for it)."""

from __future__ import annotations

from typing import ClassVar

from agent.context_engine import CompressionOutcome
from agent.engines.strategies.base import Strategy, StrategyContext
from agent.settings import CompressionSettings


class ColdPrune(Strategy):
    """See the module docstring (``compression.cold_prune``)."""

    name: ClassVar[str] = "cold_prune"

    def runs_on(self, ctx: StrategyContext) -> bool:
        return ctx.cold and ctx.trigger != "manual"

    async def plan(self, ctx: StrategyContext) -> CompressionOutcome | None:
        return await ctx.engine.prune_tool_output(
            ctx.session,
            ctx.view,
            ctx.state,
            prompt_tokens=ctx.prompt_tokens,
            trigger=ctx.trigger,
            strategy=self.name,
        )


def build(settings: CompressionSettings) -> ColdPrune | None:
    return ColdPrune() if settings.cold_prune else None
