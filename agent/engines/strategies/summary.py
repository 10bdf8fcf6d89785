"""Summary (one model call): the compressor's LLM summary of the middle of the conversation,
as before the pipeline existed. While the summary model's breaker is open,
``context.breaker_fallback: sliding`` drops the oldest exchanges instead of writing an
extractive summary."""

from __future__ import annotations

from typing import ClassVar

from agent.context_engine import CompressionOutcome
from agent.engines.strategies.base import Strategy, StrategyContext
from agent.settings import CompressionSettings


class Summary(Strategy):
    """See the module docstring."""

    name: ClassVar[str] = "summary"
    needs_llm: ClassVar[bool] = True

    async def plan(self, ctx: StrategyContext) -> CompressionOutcome | None:
        engine = ctx.engine
        if (
            engine.breaker_fallback == "sliding"
            and ctx.trigger != "manual"
            and engine.breaker_is_open(ctx.state)
        ):
            return await engine.slide(ctx, strategy="sliding")
        return await engine.summarize(
            ctx.session,
            ctx.view,
            ctx.state,
            trigger=ctx.trigger,
            focus=ctx.focus,
            prompt_tokens=ctx.prompt_tokens,
            memory_index=ctx.memory_index,
        )


def build(settings: CompressionSettings) -> Summary:
    return Summary()
