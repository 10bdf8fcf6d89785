"""The tool loop for one turn: call the model, run its tools, repeat until it answers.

Every message is stored the moment it exists, so a crash mid-turn loses nothing, and a
tool_use that was stored always gets a stored tool_result (even on /stop or a crash), so
the stored transcript stays valid for the API. Compression only happens at quiescent
points: before a call (estimate), after a complete tool round (the last call's REAL
size), and reactively when the API says the prompt is too long.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from collections.abc import Mapping
from dataclasses import replace

from agent.cache_diagnostics import diagnosed, learned
from agent.clock import Clock, utcnow
from agent.compaction import WhenSlow, compact, learn_api_limit, with_api_limit
from agent.context_engine import ContextEngine
from agent.engines.strategies.server_compaction import store_absorbed
from agent.errors import ContextOverflow, LLMError
from agent.llm_stream import StreamingProvider, TurnListener
from agent.loop_request import (
    build_request,
    estimate_request_tokens,
    note_turn_calls,
    note_turn_start,
    reply_budget,
    turn_start_id,
    turn_ttl,
    with_fallback,
    with_reply_room,
)
from agent.loop_turn import (
    SUMMARIZED_THINKING,
    Turn,
    TurnResult,
    between_tools_note,
    refusal_category,
    refused_message,
    tool_uses,
)
from agent.provider import LLMProvider, LLMRequest, LLMResponse
from agent.request_memo import RequestMemos
from agent.server_context import CLEAR_TOOL_USES, is_compaction_block
from agent.settings import LLMSettings, ModelSpec, PromptCachingSettings
from agent.storage import ConversationStore
from agent.tokens import cost_usd, model_info, prompt_size
from agent.tools import ToolContext, ToolOutput, ToolRegistry, cap_output, default_registry, tool_result_block
from agent.tools.scope import ToolScope
from agent.types import (
    AgentSession,
    ChatMessage,
    ContentBlock,
    ContextState,
    Trigger,
    UsageRecord,
)

_log = logging.getLogger(__name__)

# An estimate within this factor of the threshold is checked with an exact count (when enabled).
EXACT_COUNT_MARGIN = 1.15
CANCELLED_RESULT = "cancelled: the turn was stopped before this tool finished"
MAX_TOKENS_RESULT = (
    "not run: your reply hit the output limit (max_tokens) before this tool call was complete; "
    "call it again with a shorter input"
)


class AgentLoop:
    """Runs turns for any session; holds no per-session state between turns."""

    def __init__(
        self,
        provider: LLMProvider,
        store: ConversationStore,
        engine: ContextEngine,
        *,
        llm: LLMSettings | None = None,
        caching: PromptCachingSettings | None = None,
        tools: ToolRegistry | None = None,
        prices: dict[str, tuple[float, float]] | None = None,
        models: Mapping[str, ModelSpec] | None = None,
        clock: Clock = utcnow,
    ) -> None:
        self._provider = provider
        self._store = store
        self._engine = engine
        self._llm = llm or LLMSettings()
        self._caching = caching or PromptCachingSettings()
        self.tools = tools if tools is not None else default_registry()
        self._prices = prices
        self._models = models
        self._clock = clock
        self._memos = RequestMemos()

    async def run_turn(
        self,
        session: AgentSession,
        history: list[ChatMessage] | None = None,
        *,
        message: ChatMessage | None = None,
        state: ContextState | None = None,
        memory_scope: str | None = None,
        when_slow: WhenSlow | None = None,
        listener: TurnListener | None = None,
        tool_scope: ToolScope | None = None,
    ) -> TurnResult:
        """Answer the conversation as it stands (``history``, else the stored active view).

        ``message``, when given, is stored and appended first; otherwise the caller has
        already stored the user's message. ``state``, when given, is the session's compression
        state as the caller has just read it (else it is loaded). ``when_slow`` is told when a
        compaction takes long; ``listener`` sees the reply as it is streamed (when the provider can stream).
        ``tool_scope`` is who the turn serves: which per-chat tools (MCP servers) it is offered.
        Raises :class:`agent.errors.LLMError` subclasses for provider failures;
        ``asyncio.CancelledError`` leaves the transcript valid.
        """
        view = list(history) if history is not None else await self._store.load_active(session.id)
        if state is None:
            state = await self._store.load_context_state(session.id)
        session = with_api_limit(session, state)
        note_turn_start(state, self._clock())
        info = model_info(session.model, prices=self._prices, overrides=self._models)
        ttl = turn_ttl(self._caching.cache_ttl, view, state, info) if self._caching.enabled else None
        scope = memory_scope or session.key or session.id
        offer = self.tools.offer(tool_scope, state)
        turn = Turn(
            session, view, state, scope, ttl, offer.definitions(), when_slow, listener=listener, offer=offer
        )
        try:
            if message is not None:
                await self._append(turn, message, produced=False)
            turn.start_id = turn_start_id(turn.view)
            stopped = await self._iterate(turn)
            note_turn_calls(turn.state, len(turn.usages))
            if repr(turn.state) != turn.saved_state:
                # Most turns of a chat make one call, and the last one saved the state already.
                await self._store.save_context_state(session.id, turn.state)
        except BaseException as exc:
            if turn.open_uses:
                await self._close_round(turn, exc)
            await self._record_unrecorded(turn)
            raise
        self._engine.on_turn_complete(turn.session, turn.state, turn.view)
        return turn.result(stopped)

    async def _iterate(self, turn: Turn) -> str:
        for iteration in range(1, self._llm.max_tool_iterations + 1):
            turn.iterations = iteration
            if not turn.just_compacted:
                await self._preflight(turn)
            turn.just_compacted = False
            response = await self._call(turn)
            content = response.content
            if content and is_compaction_block(content[0]):
                content = await self._absorb_compaction(turn, response)
            content = [b for b in content if not (b.get("type") == "text" and not b.get("text"))]
            if response.stop_reason == "refusal":
                # A 200 answer, not an error: the turn ends here, nothing is asked again.
                turn.refusal = refusal_category(response.stop_details)
                await self._append(turn, refused_message(content, turn.refusal), with_usage=True)
                return "refusal"
            uses = tool_uses(content)
            if content:
                # open_uses first: an interrupted append still finishes, and its uses need results.
                turn.open_uses = uses
                await self._append(turn, ChatMessage(role="assistant", content=content), with_usage=True)
            else:
                await self._record_unrecorded(turn)
            if uses:
                truncated = response.stop_reason == "max_tokens"
                await self._run_tools(turn, uses, not_run=MAX_TOKENS_RESULT if truncated else None)
                await self._after_round(turn)
                continue
            if response.stop_reason == "pause_turn":
                continue
            return str(response.stop_reason)
        await self._append(
            turn,
            ChatMessage.assistant(
                f"(I stopped after {self._llm.max_tool_iterations} tool steps without finishing. "
                "Say 'continue' and I will pick up from here.)",
                kind="notice",
            ),
        )
        _log.warning("turn hit the tool iteration cap", extra={"session": turn.session.id})
        return "iteration_cap"

    # -- compression at quiescent points ------------------------------------------------------

    async def _preflight(self, turn: Turn) -> None:
        estimate = estimate_request_tokens(turn.session, turn.view, turn.tools, turn.state)
        near = math.ceil(estimate * EXACT_COUNT_MARGIN)
        if self._llm.exact_token_counting and self._engine.should_compress(
            turn.session, turn.state, near, trigger="in_loop"
        ):
            # Close to the threshold an estimate can compact too early or too late: ask the
            # provider for the exact size of this very request (free on Anthropic's API).
            exact = await self._exact_tokens(turn)
            if exact is not None:
                estimate = exact
        if self._engine.should_compress(turn.session, turn.state, estimate, trigger="in_loop"):
            await self._compact(turn, "in_loop", estimate)

    async def _exact_tokens(self, turn: Turn) -> int | None:
        request, _ = build_request(
            turn.session,
            turn.view,
            turn.tools,
            max_tokens=self._llm.max_output_tokens,
            cache_ttl=None,
            memo=self._memos.get(turn.session.id),
        )
        try:
            return await self._provider.count_tokens(request)
        except LLMError as exc:
            _log.info(
                "exact token count unavailable, using the estimate: %s",
                exc,
                extra={"session": turn.session.id},
            )
            return None

    async def _after_round(self, turn: Turn) -> None:
        """After a complete tool round: the last call's REAL size (never a sum over calls)."""
        if not turn.usages:
            return
        real = turn.usages[-1].context_tokens
        if self._engine.should_compress(turn.session, turn.state, real, trigger="in_loop"):
            await self._compact(turn, "in_loop", real)

    async def _compact(self, turn: Turn, trigger: Trigger, prompt_tokens: int | None) -> None:
        result = await compact(
            self._engine,
            self._store,
            turn.session,
            trigger=trigger,
            prompt_tokens=prompt_tokens,
            when_slow=turn.when_slow,
            memory_scope=turn.memory_scope,
        )
        turn.view = list(result.messages)
        # compact() saved its own copy of the state; continue from what it persisted.
        turn.state = await self._store.load_context_state(turn.session.id)
        turn.just_compacted = True
        if result.record is not None:
            turn.compactions.extend(result.records)
            # Logged once something was compacted: a check that changed nothing says nothing.
            _log.info(
                "compacted (%s): %d messages archived, %d -> %d tokens",
                trigger,
                sum(r.messages_archived for r in result.records),
                result.records[0].tokens_before,
                result.record.tokens_after,
                extra={
                    "session": turn.session.id,
                    "trigger": trigger,
                    "tokens_before": result.records[0].tokens_before,
                    "tokens_after": result.record.tokens_after,
                },
            )

    # -- the call ------------------------------------------------------------------------------

    def _request(self, turn: Turn) -> LLMRequest:
        info = model_info(turn.session.model, prices=self._prices, overrides=self._models)
        wanted = min(self._llm.max_output_tokens, info.max_output)
        # The window holds the reply too: ask for no more than the room the input leaves.
        estimate = estimate_request_tokens(turn.session, turn.view, turn.tools, turn.state)
        # The engine may send a projection of the view; what is stored never changes here.
        chosen = self._engine.select_context(turn.session, turn.state, turn.view)
        projected = len(chosen) != len(turn.view) or any(
            a is not b for a, b in zip(chosen, turn.view, strict=True)
        )
        request, sent = build_request(
            turn.session,
            chosen,
            turn.tools,
            max_tokens=reply_budget(turn.session, estimate, wanted),
            cache_ttl=turn.ttl,
            automatic_cache=self._caching.mode == "automatic",
            min_cache_prefix=info.min_cacheable,
            memo=self._memos.get(turn.session.id),
        )
        if info.summarize_thinking:
            # Text between tool calls comes back as thinking, empty unless summarized.
            request = replace(request, thinking=SUMMARIZED_THINKING)
        if not projected:
            turn.view = sent
        return with_fallback(
            self._engine.shape_request(turn.session, turn.state, request), self._llm.fallback
        )

    async def _absorb_compaction(self, turn: Turn, response: LLMResponse) -> list[ContentBlock]:
        """A reply that opens with the API's compaction block (threshold kind): stored like our
        summaries, the view reloaded; returns the rest of the reply."""
        record, rest = await store_absorbed(
            self._store, turn.session, turn.view, turn.state, response, clock=self._clock
        )
        if record is not None:
            turn.view = await self._store.load_active(turn.session.id)
            turn.compactions.append(record)
        return rest

    async def _call(self, turn: Turn) -> LLMResponse:
        request = self._request(turn)
        try:
            response = await self._create(turn, request)
        except ContextOverflow as exc:
            response = await self._overflowed(turn, request, exc)
        await self._account(turn, response)
        return response

    async def _overflowed(self, turn: Turn, request: LLMRequest, exc: ContextOverflow) -> LLMResponse:
        """The API refused the request's size: learn its real limit; when only the reply's share
        did not fit, ask for a shorter reply; else compact and retry once (a second overflow
        propagates)."""
        learn_api_limit(turn.state, exc.limit_tokens)
        turn.state.token_scale_model = turn.session.model
        turn.session = with_api_limit(turn.session, turn.state)
        await self._store.save_context_state(turn.session.id, turn.state)
        shorter = with_reply_room(request, exc)
        if shorter is not None:
            _log.info(
                "input and max_tokens over the window (%s > %s): asking for %d reply tokens",
                exc.actual_tokens,
                exc.limit_tokens,
                shorter.max_tokens,
                extra={"session": turn.session.id},
            )
            try:
                return await self._create(turn, shorter)
            except ContextOverflow as again:
                exc = again
        _log.warning(
            "prompt too long (%s > %s tokens): compacting and retrying once",
            exc.actual_tokens,
            exc.limit_tokens,
            extra={"session": turn.session.id, "trigger": "reactive"},
        )
        await self._compact(turn, "reactive", exc.prompt_tokens)
        return await self._create(turn, self._request(turn))

    async def _create(self, turn: Turn, request: LLMRequest) -> LLMResponse:
        """One call: streamed to the turn's listener when there is one and the provider can."""
        request, turn.cause = diagnosed(request, turn.state, turn.view)
        turn.sent, listener = request, turn.listener
        if listener is None or not isinstance(self._provider, StreamingProvider):
            return await self._provider.create(request)
        listener.call_started()
        response = await self._provider.stream(request, listener.text)
        note = between_tools_note(response.content)
        if note:
            listener.text(note)
        return response

    async def _account(self, turn: Turn, response: LLMResponse) -> None:
        """Record the call's usage and cost, and let the engine learn the real prompt size."""
        usage = response.usage
        turn.usages.append(usage)
        size = prompt_size(turn.session.system_prompt, turn.view, turn.tools)
        # The estimates are of the whole view, the API counted it after its edits: learn from the whole.
        cleared = sum(e.cleared_input_tokens for e in response.applied_edits if e.type == CLEAR_TOOL_USES)
        whole = replace(usage, input_tokens=usage.input_tokens + cleared) if cleared else usage
        if not response.estimated_usage:
            # A provider's guess is no count: it would teach every later estimate its blind spots.
            self._engine.on_usage(turn.session, turn.state, whole, size)
            turn.state.last_prompt_tokens = whole.context_tokens
            turn.state.last_prompt_estimate = size.messages
            turn.state.token_scale_model = turn.session.model
        runs = self._engine.on_response(turn.session, turn.state, response)
        turn.state.last_prompt_at = self._clock()
        model = response.model or turn.session.model
        cost = (
            cost_usd(model, usage, prices=self._prices, cache_ttl=turn.ttl or "5m", overrides=self._models)
            if response.billed
            else 0.0
        )
        sent, now = turn.sent, self._clock()
        check = learned(turn.state, sent, turn.view, response, turn.cause, turn.ttl, now) if sent else None
        records = [UsageRecord(model, "chat", usage, cost, response.estimated_usage, check)]
        compacting = response.compaction_usage
        if compacting is not None:
            # A compaction inside the call is billed in usage.iterations, apart from the reply.
            summary_cost = (
                cost_usd(model, compacting, prices=self._prices, cache_ttl=turn.ttl or "5m")
                if response.billed
                else 0.0
            )
            records.append(
                UsageRecord(model=model, purpose="summary", usage=compacting, cost_usd=summary_cost)
            )
        for run in runs:
            await self._store.record_strategy_run(turn.session.id, run)
        for record in records[:-1]:
            await self._store.record_usage(turn.session.id, record)
        # The call's own usage, and the state it taught, go with its reply: one transaction.
        turn.unrecorded = records[-1]

    async def _record_unrecorded(self, turn: Turn) -> None:
        """Store the last call's usage (with the state) when no reply took it along."""
        record, turn.unrecorded = turn.unrecorded, None
        if record is None:
            return
        try:
            await self._store.record_usage(turn.session.id, record, state=turn.state)
        except Exception as exc:  # on a failing turn the cause the caller gets matters more
            _log.warning("a call's usage was not stored: %s", exc, extra={"session": turn.session.id})
            return
        turn.saved_state = repr(turn.state)

    # -- tools ----------------------------------------------------------------------------------

    async def _run_tools(self, turn: Turn, uses: list[ContentBlock], *, not_run: str | None) -> None:
        turn.results = []
        for use in uses:
            if not_run is not None:
                output = ToolOutput.error(not_run)
            else:
                output = await self._run_tool(turn, use)
            turn.results.append(tool_result_block(str(use["id"]), output))
        await self._append(turn, ChatMessage(role="user", content=list(turn.results)))
        turn.open_uses, turn.results = [], []

    async def _run_tool(self, turn: Turn, use: ContentBlock) -> ToolOutput:
        name = str(use.get("name", ""))
        if turn.listener is not None:
            turn.listener.tool_started(name)
        ctx = ToolContext(
            turn.session,
            self._store,
            turn.memory_scope,
            self._clock,
            tool_use_id=str(use["id"]),
            turn_start_id=turn.start_id,
            offered=turn.tool_offer().tools,
        )
        try:
            output = await turn.tool_offer().dispatch(ctx, name, use.get("input", {}))
        except Exception as exc:  # a tool's bug must not abort the turn: the model reads it and goes on
            _log.error("tool %s raised", name, exc_info=exc, extra={"session": turn.session.id})
            output = ToolOutput.error(
                f"the {name} tool failed unexpectedly ({type(exc).__name__}); "
                "try other input, or answer without it"
            )
        return cap_output(name, output, self._llm.tool_output_cap_chars)

    async def _close_round(self, turn: Turn, exc: BaseException) -> None:
        """Store a result for every stored tool_use still unanswered, so the transcript stays valid."""
        if isinstance(exc, asyncio.CancelledError):
            reason = CANCELLED_RESULT
        else:
            reason = f"failed: the turn was aborted ({type(exc).__name__}) before this tool finished"
        answered = {str(b.get("tool_use_id")) for b in turn.results}
        results = list(turn.results)
        for use in turn.open_uses:
            if str(use["id"]) not in answered:
                results.append(tool_result_block(str(use["id"]), ToolOutput.error(reason)))
        open_ids = {str(use["id"]) for use in turn.open_uses}
        turn.open_uses, turn.results = [], []
        if not turn.produced or set(turn.produced[-1].tool_use_ids()) != open_ids:
            return  # the assistant message never reached the store: nothing to answer
        _log.warning("turn interrupted mid tool round: %s", reason, extra={"session": turn.session.id})
        # Stored even if cancelled again (shielded); the original exception is what the caller gets.
        with contextlib.suppress(asyncio.CancelledError):
            await self._append(turn, ChatMessage(role="user", content=results))

    async def _append(
        self, turn: Turn, message: ChatMessage, *, produced: bool = True, with_usage: bool = False
    ) -> ChatMessage:
        """Store ``message`` and add it to the view; ``with_usage``: the last call's usage and the
        state go in the same transaction. A cancellation waits for the write to finish (so we know
        what is stored) and is re-raised afterwards."""
        record = turn.unrecorded if with_usage else None
        sid = turn.session.id
        task = asyncio.ensure_future(
            self._store.append_message(sid, message)
            if record is None
            else self._store.append_reply(sid, message, record, turn.state)
        )
        cancelled = False
        while not task.done():
            try:
                await asyncio.shield(task)
            except asyncio.CancelledError:
                if task.cancelled():
                    raise
                cancelled = True
        stored = task.result()
        if record is not None:
            turn.unrecorded, turn.saved_state = None, repr(turn.state)
        turn.record(stored, produced=produced)
        if cancelled:
            raise asyncio.CancelledError
        return stored
