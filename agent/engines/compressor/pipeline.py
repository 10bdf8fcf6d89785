"""The default engine (``compressor``): the strategies of ``compression.strategies``, cheapest
first, each stopping the pipeline as soon as the view is under target.

::

    snip (asked for)  ->  cold_prune / prune (no call)  ->  [server-side strategies]
      ->  summary (one call)  ->  reactive (no call; after "prompt is too long")

Which strategies may run depends on why the compaction fired: below the summary threshold
(``compression.prune_at``, or a cold cache) only those that need no call; at the threshold all
of them, aiming at the usual target; on "prompt is too long" the cheapest that frees enough.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, Literal

from agent.clock import utcnow
from agent.context_engine import CompressionOutcome, CompressionSteps
from agent.engines import veto_rest
from agent.engines.compressor.engine import MUST_SHRINK_RATIO, TARGET_FRACTION, ContextCompressor
from agent.engines.hooks import PreCompact
from agent.engines.sliding import plan_slide, with_kept_text
from agent.engines.strategies.base import RequestStrategy, Strategy, StrategyContext, load_strategy
from agent.provider import LLMProvider, LLMRequest, LLMResponse
from agent.settings import CompressionSettings
from agent.types import AgentSession, ChatMessage, ContextState, StrategyRun, Trigger

# ContextState.extra key: the prompt size at which the no-call trigger last fired.
PRUNE_NOOP_KEY = "prune_noop_tokens"
PRUNE_RETRY_GROWTH = 1.05


class CostOrderedCompressor(ContextCompressor):
    """See the module docstring."""

    name = "compressor"
    shares_state = True

    def __init__(
        self,
        settings: CompressionSettings,
        provider: LLMProvider,
        *,
        summary_model: str,
        clock: Callable[[], datetime] = utcnow,
        prices: dict[str, tuple[float, float]] | None = None,
        cache_ttl_seconds: float = 300.0,
        breaker_fallback: Literal["extractive", "sliding"] = "extractive",
        timeout_seconds: float | None = None,
    ) -> None:
        super().__init__(
            settings,
            provider,
            summary_model=summary_model,
            clock=clock,
            prices=prices,
            timeout_seconds=timeout_seconds,
        )
        self.cache_ttl_seconds = cache_ttl_seconds
        self.breaker_fallback = breaker_fallback
        # The tool definitions of the last chat request: a server-side compaction sends the
        # same ones (the API's summarizer reads them, and the cached prefix starts with them).
        self.request_tools: list[dict[str, Any]] = []
        loaded = [load_strategy(name, settings) for name in settings.strategies]
        self.strategies: list[Strategy | RequestStrategy] = [s for s in loaded if s is not None]

    # ---- what the strategies ask of the engine ----------------------------------------------

    def must_shrink_tokens(self, session: AgentSession) -> int:
        return int(session.context_window * MUST_SHRINK_RATIO)

    def prune_tokens(self, session: AgentSession) -> int:
        return int(session.budget_window * self.settings.prune_at)

    def breaker_is_open(self, state: ContextState) -> bool:
        return self._breaker_open(state)

    def cold(self, state: ContextState) -> bool:
        """The cached prefix has expired: no call within the cache TTL."""
        last = state.last_prompt_at
        return last is not None and (self.clock() - last).total_seconds() > self.cache_ttl_seconds

    def _enabled(self, name: str) -> bool:
        return any(s.name == name for s in self.strategies)

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
    ) -> CompressionOutcome:
        """Today's compressor: the LLM summary of the middle."""
        return await ContextCompressor.compress(
            self,
            session,
            messages,
            state,
            trigger=trigger,
            focus=focus,
            prompt_tokens=prompt_tokens,
            memory_index=memory_index,
        )

    async def slide(self, ctx: StrategyContext, *, strategy: str) -> CompressionOutcome:
        """Drop the oldest whole exchanges until the view is under the step's goal (no call)."""
        goal = (
            min(ctx.goal, self.must_shrink_tokens(ctx.session))
            if ctx.goal > 0
            else self.target_tokens(ctx.session)
        )
        plan, before, after, gone = plan_slide(
            ctx.session,
            ctx.view,
            ctx.state,
            trigger=ctx.trigger,
            goal_tokens=goal,
            clock=self.clock,
            strategy=strategy,
        )
        before = max(before, ctx.size)
        if plan is None:
            return CompressionOutcome(
                None, "failed", before, before, reason="nothing to drop", strategy=strategy
            )
        must = ctx.trigger == "reactive" or before >= self.must_shrink_tokens(ctx.session)
        verdict = await self.hooks.run_pre(PreCompact(ctx.session, ctx.trigger, strategy, gone, must))
        if verdict.vetoed:
            return CompressionOutcome(
                None,
                "failed",
                before,
                before,
                reason="vetoed by a pre_compact hook",
                strategy=strategy,
                vetoed=True,
            )
        if verdict.keep:
            plan = with_kept_text(plan, verdict.keep)
        ctx.state.compaction_count += 1
        ctx.state.last_prompt_tokens = after
        ctx.state.last_prompt_estimate = None
        return CompressionOutcome(
            plan, "ok", before, after, reason="dropped oldest exchanges", strategy=strategy
        )

    # ---- when -----------------------------------------------------------------------------

    def should_compress(
        self, session: AgentSession, state: ContextState, prompt_tokens: int, *, trigger: Trigger = "in_loop"
    ) -> bool:
        if super().should_compress(session, state, prompt_tokens, trigger=trigger):
            return True
        if trigger != "in_loop" or not self.settings.enabled:
            return False
        noop = state.extra.get(PRUNE_NOOP_KEY)
        if isinstance(noop, int) and prompt_tokens <= noop * PRUNE_RETRY_GROWTH:
            return False
        if veto_rest.resting(state, prompt_tokens):
            return False
        if self._enabled("prune") and prompt_tokens >= self.prune_tokens(session):
            return True
        return (
            self._enabled("cold_prune")
            and prompt_tokens >= self.settings.cold_prune_min_tokens
            and self.cold(state)
        )

    # ---- how ------------------------------------------------------------------------------

    def _goal(self, session: AgentSession, trigger: Trigger, size: int) -> tuple[int, bool]:
        """(the size to get under, whether a model call may be made)."""
        threshold = self.threshold_tokens(session)
        if trigger == "manual":
            return 0, True
        if trigger == "reactive":
            return threshold, True
        if trigger in ("hygiene", "scheduled") or size >= threshold:
            return int(threshold * TARGET_FRACTION), True
        return self.prune_tokens(session), False

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
        view = messages
        size = (
            prompt_tokens if prompt_tokens is not None else self.estimate_prompt_tokens(session, state, view)
        )
        goal, llm_allowed = self._goal(session, trigger, size)
        if not llm_allowed:
            # The no-call trigger fires again only once the prompt has grown past where it fired
            # this time: each prune rewrites the cached prefix, so it must be worth doing.
            state.extra[PRUNE_NOOP_KEY] = size
        cold = self.cold(state)
        last: CompressionOutcome | None = None
        yielded = False
        for strategy in self.strategies:
            ctx = StrategyContext(
                self,
                session,
                state,
                view,
                trigger,
                size,
                goal,
                llm_allowed,
                cold,
                focus,
                memory_index,
                prompt_tokens,
            )
            if isinstance(strategy, Strategy):
                if not strategy.runs_on(ctx) or (strategy.needs_llm and not llm_allowed):
                    continue
                outcome = await strategy.plan(ctx)
                if outcome is None:
                    continue
                if outcome.plan is None and not outcome.summary_usage and not outcome.engine_failures:
                    last = outcome
                    continue
                view = yield outcome
                yielded = True
                prompt_tokens = None
                size = self.estimate_prompt_tokens(session, state, view)
                if outcome.plan is not None and llm_allowed:
                    state.extra.pop(PRUNE_NOOP_KEY, None)
                if size <= goal:
                    return
            else:
                freed = strategy.expected_freed(session, view, size)
                if freed and size - freed <= goal:
                    # The API will free enough on the next call: the dearer strategies wait.
                    last = CompressionOutcome(
                        None,
                        "ok",
                        size,
                        size - freed,
                        reason=f"{strategy.name} frees about {freed} tokens server-side",
                        strategy=strategy.name,
                    )
                    break
        if not yielded:
            yield last or CompressionOutcome(None, "failed", size, size, reason="nothing to compress")

    # ---- requests -------------------------------------------------------------------------

    def _request_strategies(self) -> Sequence[RequestStrategy]:
        return [s for s in self.strategies if not isinstance(s, Strategy)]

    def shape_request(self, session: AgentSession, state: ContextState, request: LLMRequest) -> LLMRequest:
        if request.tools and request.purpose == "chat":
            self.request_tools = request.tools
        for strategy in self._request_strategies():
            request = strategy.shape(session, request)
        return request

    def on_response(
        self, session: AgentSession, state: ContextState, response: LLMResponse
    ) -> Sequence[StrategyRun]:
        runs: list[StrategyRun] = []
        for strategy in self._request_strategies():
            freed = strategy.observe(state, response)
            if freed > 0:
                runs.append(StrategyRun(strategy.name, freed))
        return runs
