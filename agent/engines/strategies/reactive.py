"""Reactive (no call): the last resort after "prompt is too long". The cheaper strategies ran
first (prune, then the summary); when the view is still over what the API takes, the oldest
whole exchanges are dropped into the archive (as the ``sliding`` engine does) so the one retry
fits."""

from __future__ import annotations

from typing import ClassVar

from agent.context_engine import CompressionOutcome
from agent.engines.strategies.base import Strategy, StrategyContext
from agent.settings import CompressionSettings


class Reactive(Strategy):
    """See the module docstring."""

    name: ClassVar[str] = "reactive"

    def runs_on(self, ctx: StrategyContext) -> bool:
        # Only the API's own refusal: an estimate over the window (in-loop, hygiene) may be wrong
        # about what the earlier steps freed, and dropping whole exchanges takes the protected
        # head with it; if the prompt really is too long the API says so and this runs then.
        return ctx.trigger == "reactive"

    async def plan(self, ctx: StrategyContext) -> CompressionOutcome | None:
        return await ctx.engine.slide(ctx, strategy=self.name)


def build(settings: CompressionSettings) -> Reactive:
    return Reactive()
