"""Server-side compaction: the API writes the summary, and returns it as a ``compaction`` block.

Two kinds (``compression.server_compaction``), for the models that support them:

- ``on_demand`` (beta ``compact-2026-09-04``): where our summary would run, one request
  with ``"compaction": {"type": "summarize"}`` over the older part of the view returns a signed
  block. It is stored like our summaries, through the same store transaction: the messages it
  summarizes are soft-archived (``active=false, compacted=true``, searchable, recallable) and a
  ``kind="summary"`` message holding the block takes their place, first in the view; the recent
  turns stay verbatim after it.
- ``threshold`` (beta ``compact-2026-01-12``): every chat request carries the
  ``compact_20260112`` edit with our threshold; when the API compacts inside a call, the block
  it puts first in the reply is split off and stored the same way (everything the call was sent
  is archived), and the rest of the reply is stored as usual.

In the pipeline (``compression.strategies``) the on-demand kind is a plan strategy before
``summary`` (which serves when it does not apply, fails or brings no summary back); the
threshold kind is a request strategy (its ``expected_freed`` holds the summary back once the API
will compact the next call). The loop stores any block a reply opens with (:func:`store_absorbed`).

The block is kept exactly as the API returned it (its content and signature are what the API
checks) and sent back first in ``messages`` with the beta header. The compaction's own call is
billed from ``usage.iterations``, not the top-level usage. See docs/server-side-context.md.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any, ClassVar, Literal

from agent.clock import utcnow
from agent.context_engine import CompressionOutcome
from agent.engines.hooks import PreCompact
from agent.engines.strategies.base import Strategy, StrategyContext
from agent.errors import LLMError, StoreError
from agent.loop_request import build_request, estimate_request_tokens
from agent.provider import LLMProvider, LLMRequest, LLMResponse
from agent.server_context import (
    COMPACTION_BETA,
    THRESHOLD_COMPACT,
    THRESHOLD_COMPACTION_BETA,
    CompactionParam,
    ContextManagement,
    ThresholdCompactEdit,
    betas_for,
    compaction_blocks,
    is_compaction_block,
    record_strategy_run,
)
from agent.settings import CompressionSettings
from agent.storage import ConversationStore
from agent.tokens import cost_usd, model_info
from agent.transcript import validate_messages
from agent.types import (
    AgentSession,
    ChatMessage,
    CompactionPlan,
    CompactionRecord,
    ContentBlock,
    ContextState,
    Insertion,
    Trigger,
    Usage,
    UsageRecord,
)

_log = logging.getLogger(__name__)

Kind = Literal["on_demand", "threshold"]

# The models the documentation lists per kind (the Models API's capabilities.compaction says
# the same per model); a dated id matches by prefix.
ON_DEMAND_MODELS: tuple[str, ...] = (
    "claude-fable-5-1",
    "claude-mythos-5-1",
    "claude-fable-5",
    "claude-mythos-5",
    "claude-mythos-preview",
    "claude-opus-5-5",
    "claude-opus-5",
    "claude-opus-4-8",
    "claude-opus-4-7",
    "claude-opus-4-6",
    "claude-sonnet-5",
    "claude-sonnet-4-6",
)
THRESHOLD_MODELS: tuple[str, ...] = tuple(m for m in ON_DEMAND_MODELS if m != "claude-opus-5-5")
# compact_20260112 refuses a trigger below this.
MIN_THRESHOLD_TRIGGER = 50_000
# "max_tokens caps the whole call, including any thinking, so allow several thousand tokens."
COMPACTION_MAX_TOKENS = 8192
MAX_INSTRUCTIONS = 16_384
# About what a server summary costs in the view (the fake's and the docs' examples are smaller).
SUMMARY_TOKENS = 2000
NAME = "server_compaction"
# Used only when a pre_compact hook adds text: "instructions" replaces the API's own prompt.
DEFAULT_INSTRUCTIONS = (
    "Summarize the conversation so far for continuing it: the user's goals, constraints and "
    "preferences, decisions made, work done and still to do, open questions, and every name, "
    "number and fact a later turn may need. Do not call tools; respond with the summary text only."
)


def supports(model: str, kind: Kind) -> bool:
    """Whether ``model`` can compact server-side in ``kind``."""
    # The longest listed id that names it: claude-opus-5-5 is not claude-opus-5 with a date.
    named = [m for m in ON_DEMAND_MODELS if model == m or model.startswith(m + "-")]
    if not named:
        return False
    return max(named, key=len) in (ON_DEMAND_MODELS if kind == "on_demand" else THRESHOLD_MODELS)


def split_point(view: Sequence[ChatMessage]) -> int | None:
    """Where the recent turns kept verbatim begin: the last user message that opens a turn
    (not a tool_result, not a summary). Cutting there never splits a tool pair, and the part
    before it ends on a complete turn. None when nothing before it is worth summarizing."""
    for index in range(len(view) - 1, 0, -1):
        message = view[index]
        if message.role == "user" and message.kind == "message" and not message.tool_result_ids():
            head = view[:index]
            if len(head) == 1 and any(is_compaction_block(b) for b in head[0].content):
                return None  # only the last block: summarizing it again frees nothing
            return index
    return None


def summary_message(block: ContentBlock, created_at: datetime) -> ChatMessage:
    """The stored form of a server summary: the block, unchanged, alone in a user message (the
    API takes it as the first block of the first message, whatever its role)."""
    return ChatMessage(role="user", content=[block], kind="summary", created_at=created_at)


def absorb(
    session: AgentSession,
    view: Sequence[ChatMessage],
    response: LLMResponse,
    *,
    clock: Callable[[], datetime],
    trigger: Trigger = "in_loop",
) -> tuple[CompactionPlan | None, list[ContentBlock]]:
    """Split a threshold compaction off a chat reply: the plan that archives every message the
    call was sent and puts the block in their place, and the reply's remaining content.
    (None, content) when the reply carries no usable block."""
    content = list(response.content)
    if not content or not is_compaction_block(content[0]):
        return None, content
    block, rest = content[0], content[1:]
    archived = tuple(m.id for m in view if m.id is not None)
    if not block.get("content") or not archived:
        # A failed compaction (content null) is a no-op for the API: nothing to store.
        return None, rest
    usage = response.compaction_usage or Usage()
    plan = CompactionPlan(
        trigger=trigger,
        archive_ids=archived,
        insertions=(Insertion(anchor_id=archived[0], message=summary_message(block, clock())),),
        first_kept_id=None,
        tokens_before=usage.input_tokens + usage.cache_read_input_tokens + usage.cache_creation_input_tokens,
        tokens_after=response.usage.context_tokens,
        model=session.model,
        duration_ms=0,
        strategy=NAME,
    )
    return plan, rest


async def store_absorbed(
    store: ConversationStore,
    session: AgentSession,
    view: Sequence[ChatMessage],
    state: ContextState,
    response: LLMResponse,
    *,
    clock: Callable[[], datetime],
) -> tuple[CompactionRecord | None, list[ContentBlock]]:
    """:func:`absorb`, applied through the store's compaction transaction: the record (None when
    nothing was stored) and the rest of the reply."""
    plan, rest = absorb(session, view, response, clock=clock)
    if plan is None:
        return None, rest
    problems = validate_plan_view(view, plan)
    if problems:
        _log.warning("server compaction not stored: %s", problems[0], extra={"session": session.id})
        return None, rest
    try:
        record = await store.archive_and_summarize(session.id, plan)
    except StoreError as exc:
        # Nothing changed in the store: the whole history goes out again, and is compacted again.
        _log.warning("server compaction not stored: %s", exc, extra={"session": session.id})
        return None, rest
    record_strategy_run(state, NAME, max(0, plan.tokens_before - plan.tokens_after), clock().isoformat())
    _log.info(
        "server compaction stored: %d messages archived",
        len(plan.archive_ids),
        extra={"session": session.id, "trigger": plan.trigger},
    )
    return record, rest


def validate_plan_view(view: Sequence[ChatMessage], plan: CompactionPlan) -> list[str]:
    """What the API would refuse in the view ``plan`` leaves (the messages it keeps, its insertions)."""
    gone = set(plan.archive_ids)
    kept = [i.message for i in plan.insertions] + [m for m in view if m.id not in gone]
    return validate_messages(kept)


class ThresholdCompaction:
    """The threshold kind: every chat request of a supported model carries ``compact_20260112``
    at our threshold, so the API compacts inside the call; the block is stored by the loop
    (:func:`store_absorbed`). A request strategy of the pipeline."""

    name: ClassVar[str] = NAME

    def __init__(self, settings: CompressionSettings) -> None:
        self.settings = settings

    def trigger_tokens(self, session: AgentSession) -> int:
        at = math.ceil(session.budget_window * self.settings.threshold_for(session.model))
        return max(MIN_THRESHOLD_TRIGGER, at)

    def shape(self, session: AgentSession, request: LLMRequest) -> LLMRequest:
        """``request`` with the ``compact_20260112`` edit (supported model, no signed block, which
        the API refuses beside it)."""
        signed = any("signature" in b for b in compaction_blocks(request.messages))
        if not supports(session.model, "threshold") or request.compaction is not None or signed:
            return request
        edit: ThresholdCompactEdit = {
            "type": THRESHOLD_COMPACT,
            "trigger": {"type": "input_tokens", "value": self.trigger_tokens(session)},
            "pause_after_compaction": False,
        }
        if self.settings.server_compaction_instructions:
            edit["instructions"] = self.settings.server_compaction_instructions
        edits = list(request.context_management["edits"]) if request.context_management else []
        managed: ContextManagement = {"edits": [*edits, edit]}
        betas = (
            request.betas
            if THRESHOLD_COMPACTION_BETA in request.betas
            else (*request.betas, THRESHOLD_COMPACTION_BETA)
        )
        return replace(request, context_management=managed, betas=betas)

    def observe(self, state: ContextState, response: LLMResponse) -> int:
        """Nothing to learn here: the loop stores a returned block (:func:`store_absorbed`)."""
        return 0

    def expected_freed(self, session: AgentSession, view: Sequence[ChatMessage], prompt_tokens: int) -> int:
        """Past the trigger the API summarizes the whole prompt on the next call: all but a summary."""
        if not supports(session.model, "threshold") or prompt_tokens < self.trigger_tokens(session):
            return 0
        return max(0, prompt_tokens - SUMMARY_TOKENS)


class OnDemandCompaction(Strategy):
    """The on-demand kind: where our summary would run, the API writes it (one call); the
    recent turns stay verbatim after the block. A plan strategy of the pipeline, before
    ``summary``, which serves when this one does not apply or brings no summary back."""

    name: ClassVar[str] = NAME
    needs_llm: ClassVar[bool] = True

    def __init__(self, settings: CompressionSettings, clock: Callable[[], datetime] = utcnow) -> None:
        self.settings = settings
        self.clock = clock

    def runs_on(self, ctx: StrategyContext) -> bool:
        return supports(ctx.session.model, "on_demand")

    def request(
        self,
        session: AgentSession,
        head: list[ChatMessage],
        tools: list[dict[str, Any]],
        cache_ttl: str | None,
        keep: Sequence[str] = (),
    ) -> LLMRequest:
        """The compaction request for ``head``: the chat's system prompt and tools (the
        summarizer reads them, and the cached prefix is the chat's)."""
        max_tokens = min(COMPACTION_MAX_TOKENS, model_info(session.model).max_output)
        request, _ = build_request(session, head, tools, max_tokens=max_tokens, cache_ttl=cache_ttl)
        param: CompactionParam = {"type": "summarize"}
        instructions = self.settings.server_compaction_instructions
        if keep:
            # What a pre_compact hook says the summary must keep, on top of the API's own prompt.
            kept = "\n".join(f"- {k}" for k in keep)
            base = instructions or DEFAULT_INSTRUCTIONS
            instructions = f"{base}\n\nThe summary must keep, word for word:\n{kept}"[:MAX_INSTRUCTIONS]
        if instructions:
            param["instructions"] = instructions
        return replace(
            request,
            compaction=param,
            betas=betas_for(request.messages, (COMPACTION_BETA,)),
            purpose="summary",
        )

    async def plan(self, ctx: StrategyContext) -> CompressionOutcome | None:
        engine = ctx.engine
        cut = split_point(ctx.view)
        if cut is None or any(m.id is None for m in ctx.view[:cut]):
            return None
        head = ctx.view[:cut]
        must = ctx.trigger == "reactive" or ctx.size >= engine.must_shrink_tokens(ctx.session)
        verdict = await engine.hooks.run_pre(PreCompact(ctx.session, ctx.trigger, NAME, head, must))
        if verdict.vetoed:
            return CompressionOutcome(
                None,
                "failed",
                ctx.size,
                ctx.size,
                reason="vetoed by a pre_compact hook",
                strategy=NAME,
                vetoed=True,
            )
        try:
            return await self.compact(
                engine.provider,
                ctx.session,
                ctx.view,
                ctx.state,
                trigger=ctx.trigger,
                tools=list(engine.request_tools),
                focus=ctx.focus,
                prompt_tokens=ctx.size,
                prices=engine.prices,
                keep=verdict.keep,
            )
        except LLMError as exc:
            # Fail open: the next strategy (our summary) serves this compaction.
            _log.warning(
                "server compaction failed, the next strategy serves: %s",
                exc,
                extra={"session": ctx.session.id},
            )
            return None

    async def compact(
        self,
        provider: LLMProvider,
        session: AgentSession,
        view: list[ChatMessage],
        state: ContextState,
        *,
        trigger: Trigger,
        tools: list[dict[str, Any]],
        focus: str | None = None,
        prompt_tokens: int | None = None,
        cache_ttl: str | None = "5m",
        prices: dict[str, tuple[float, float]] | None = None,
        keep: Sequence[str] = (),
    ) -> CompressionOutcome:
        """Plan an on-demand compaction of ``view``. Raises :class:`agent.errors.LLMError` when
        the call fails; a plan of None (with the reason, and the call's cost) when no summary
        came back."""
        before = prompt_tokens or estimate_request_tokens(session, view, tools, state)
        cut = split_point(view)
        if cut is None or any(m.id is None for m in view[:cut]):
            return CompressionOutcome(
                None, "failed", before, before, reason="nothing to summarize server-side", strategy=NAME
            )
        head, tail = view[:cut], view[cut:]
        started = time.monotonic()
        response = await provider.create(self.request(session, head, tools, cache_ttl, keep))
        usage = response.compaction_usage or Usage()
        model = response.model or session.model
        billed = UsageRecord(
            model=model,
            purpose="summary",
            usage=usage,
            cost_usd=cost_usd(model, usage, prices=prices) if response.billed else 0.0,
        )
        block = response.content[0] if response.content else None
        if (
            response.stop_reason != "compaction"
            or block is None
            or not is_compaction_block(block)
            or not block.get("content")
        ):
            reason = f"the API returned no summary (stop_reason {response.stop_reason})"
            return CompressionOutcome(
                None, "failed", before, before, reason=reason, summary_usage=(billed,), strategy=NAME
            )
        summary = summary_message(block, self.clock())
        after_view = [summary, *tail]
        problems = validate_messages(after_view)
        if problems:
            reason = f"the compacted view would be invalid: {problems[0]}"
            return CompressionOutcome(
                None, "failed", before, before, reason=reason, summary_usage=(billed,), strategy=NAME
            )
        after = estimate_request_tokens(session, after_view, tools, ContextState())
        anchor = head[0].id
        assert anchor is not None  # checked above: every head message is stored
        plan = CompactionPlan(
            trigger=trigger,
            archive_ids=tuple(m.id for m in head if m.id is not None),
            insertions=(Insertion(anchor_id=anchor, message=summary),),
            first_kept_id=tail[0].id,
            tokens_before=before,
            tokens_after=after,
            model=model,
            duration_ms=int((time.monotonic() - started) * 1000),
            focus=focus,
            strategy=NAME,
        )
        state.compaction_count += 1
        state.last_prompt_tokens = after
        state.last_prompt_estimate = None
        record_strategy_run(state, NAME, max(0, before - after), self.clock().isoformat())
        return CompressionOutcome(plan, "ok", before, after, summary_usage=(billed,), strategy=NAME)


def build(settings: CompressionSettings) -> OnDemandCompaction | ThresholdCompaction | None:
    """The strategy of ``compression.server_compaction`` (None: off)."""
    if settings.server_compaction == "on_demand":
        return OnDemandCompaction(settings)
    if settings.server_compaction == "threshold":
        return ThresholdCompaction(settings)
    return None
