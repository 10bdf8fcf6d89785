"""Prune (no call): old tool output outside the protected tail becomes one line each, on its
own trigger ``compression.prune_at`` (below the summary threshold), and first in every
compaction. The originals are archived, so ``recall`` still has them."""

from __future__ import annotations

from typing import ClassVar

from agent.context_engine import CompressionOutcome
from agent.engines.strategies.base import Strategy, StrategyContext
from agent.settings import CompressionSettings


class Prune(Strategy):
    """See the module docstring."""

    name: ClassVar[str] = "prune"

    def runs_on(self, ctx: StrategyContext) -> bool:
        return ctx.trigger != "manual"

    async def plan(self, ctx: StrategyContext) -> CompressionOutcome | None:
        return await ctx.engine.prune_tool_output(
            ctx.session,
            ctx.view,
            ctx.state,
            prompt_tokens=ctx.prompt_tokens,
            trigger=ctx.trigger,
            strategy=self.name,
        )


def build(settings: CompressionSettings) -> Prune:
    return Prune()
