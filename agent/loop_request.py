"""Building one Messages API request from the active view, and estimating its size.

The system prompt is the session's, frozen: one text block, never rewritten, so the
cached prefix (tools -> system -> messages) stays byte-identical across turns.
"""

from __future__ import annotations

import itertools
import logging
import math
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from agent.errors import ContextOverflow, InvalidRequest
from agent.prompt_caching import (
    CALLS_PER_TURN_KEY,
    KEPT_GAPS,
    MIN_GAPS,
    TURN_GAPS_KEY,
    apply_cache_control,
    cache_marker,
    cheapest_ttl,
    choose_ttl,
)
from agent.provider import LLMRequest
from agent.request_memo import RequestMemo, common_prefix
from agent.tokens import (
    ModelInfo,
    estimate_message_tokens,
    estimate_prompt_tokens,
    model_info,
    overhead_tokens,
)
from agent.tools.citable import plain_search_results
from agent.tools.deferral import load_used_tools
from agent.transcript import repair_tool_pairs, validate_wire
from agent.types import AgentSession, ChatMessage, ContentBlock, ContextState, text_block
from agent.wire_rules import version_safe

_log = logging.getLogger(__name__)


def system_blocks(session: AgentSession) -> list[ContentBlock]:
    """The frozen system prompt as API blocks (none when it is empty: an empty text block is a 400)."""
    return [text_block(session.system_prompt)] if session.system_prompt else []


def estimate_request_tokens(
    session: AgentSession,
    view: Sequence[ChatMessage],
    tools: list[dict[str, Any]],
    state: ContextState,
) -> int:
    """Tokens of the request the view would make (see :func:`agent.tokens.estimate_prompt_tokens`)."""
    return estimate_prompt_tokens(session.system_prompt, view, state, tools=tools)


def turn_start_id(view: Sequence[ChatMessage]) -> int | None:
    """Id of the first of the user messages the view ends with (the question of the turn about to run)."""
    start: int | None = None
    for m in reversed(view):
        if m.role != "user" or m.kind != "message" or m.tool_result_ids():
            break
        if m.id is not None:
            start = m.id
    return start


def turn_ttl(
    setting: str,
    view: Sequence[ChatMessage],
    state: ContextState | None = None,
    info: ModelInfo | None = None,
) -> str | None:
    """The cache TTL for this turn (None: no caching). "auto" prices the TTLs over the gaps
    between this session's recent turns (:func:`agent.prompt_caching.cheapest_ttl`) once a few
    are known; before that it looks at how far apart the user's messages are."""
    gaps = state.extra.get(TURN_GAPS_KEY) if state is not None else None
    if setting == "auto" and info is not None and isinstance(gaps, list) and len(gaps) >= MIN_GAPS:
        assert state is not None
        calls = float(state.extra.get(CALLS_PER_TURN_KEY, 1.0))
        price = info.input_price or 1.0
        return cheapest_ttl(
            [float(g) for g in gaps],
            calls,
            read=info.read_price() / price,
            write_5m=info.write_price("5m") / price,
            write_1h=info.write_price("1h") / price,
        )
    times = [
        m.created_at
        for m in view
        if m.role == "user" and m.created_at is not None and m.kind == "message" and not m.tool_result_ids()
    ]
    return choose_ttl(setting, times)


def note_turn_start(state: ContextState, now: datetime) -> None:
    """Remember how long the session was quiet before this turn (what "auto" prices TTLs on)."""
    if state.last_prompt_at is None:
        return
    gaps = state.extra.get(TURN_GAPS_KEY)
    kept = [float(g) for g in gaps] if isinstance(gaps, list) else []
    kept.append(max(0.0, (now - state.last_prompt_at).total_seconds()))
    state.extra[TURN_GAPS_KEY] = kept[-KEPT_GAPS:]


def note_turn_calls(state: ContextState, calls: int) -> None:
    """Smooth the session's model calls per turn (tool rounds make caching pay even on a miss)."""
    known = state.extra.get(CALLS_PER_TURN_KEY)
    state.extra[CALLS_PER_TURN_KEY] = (
        calls if not isinstance(known, int | float) else known + 0.3 * (calls - known)
    )


def build_request(
    session: AgentSession,
    view: list[ChatMessage],
    tools: list[dict[str, Any]],
    *,
    max_tokens: int,
    cache_ttl: str | None,
    automatic_cache: bool = False,
    min_cache_prefix: int = 0,
    memo: RequestMemo | None = None,
) -> tuple[LLMRequest, list[ChatMessage]]:
    """The request for ``view``, checked with the API's rules; returns it with the view it was
    built from (repaired, loudly, in the should-never-happen case that the view was invalid).

    ``cache_ttl`` None: no caching; else our breakpoints (none below ``min_cache_prefix``
    tokens), or with ``automatic_cache`` the API's own top-level marker. ``memo``: the
    session's previous request, whose unchanged prefix is reused (the same request results)."""
    for attempt in range(2):
        system = system_blocks(session)
        plain = not model_info(session.model).search_results
        sums: list[int] | None = None
        if memo is not None:
            wires, sums = memo.wires(view, plain=plain)
        else:
            wires = [m.to_wire() for m in view]
            wires = plain_search_results(wires) if plain else wires
        wires = version_safe(wires)
        messages = wires
        top: dict[str, str] | None = None
        if cache_ttl is not None and automatic_cache:
            top = cache_marker(cache_ttl)
        elif cache_ttl is not None:
            fixed = overhead_tokens(session.system_prompt, tools)
            if sums is None:
                sums = list(itertools.accumulate(estimate_message_tokens(m) for m in view))
            system, messages = apply_cache_control(
                system,
                wires,
                ttl=cache_ttl,
                prefix_tokens=[fixed + s for s in sums],
                system_tokens=fixed,
                min_prefix=min_cache_prefix,
                unmarked=memo is not None and memo.unmarked,
            )
        sent_tools = load_used_tools(tools, messages)
        if memo is not None:
            # The messages before the first marked one are the memo's own dicts: the next
            # request starts with them too.
            stable = common_prefix(messages, wires)
            problems = memo.check.problems(messages, system, sent_tools, stable=stable)
        else:
            problems = validate_wire(messages, system, sent_tools)
        if not problems:
            request = LLMRequest(
                model=session.model,
                messages=messages,
                max_tokens=max_tokens,
                system=system,
                tools=sent_tools,
                cache_control=top,
            )
            return request, view
        if attempt == 0:
            _log.error(
                "invalid transcript before a call, repairing tool pairs: %s",
                "; ".join(problems),
                extra={"session": session.id},
            )
            view = repair_tool_pairs(view)
    raise InvalidRequest(f"the transcript of session {session.id} cannot be repaired: {problems[0]}")


# A reply budget below this is no real answer: then the context is compacted instead.
FALLBACK_BETA = "server-side-fallback-2026-07-01"


def with_fallback(request: LLMRequest, fallback: str) -> LLMRequest:
    """``request`` asking the API to answer a refused request on a fallback model (``llm.fallback``)."""
    if fallback == "off":
        return request
    betas = request.betas if FALLBACK_BETA in request.betas else (*request.betas, FALLBACK_BETA)
    return replace(request, fallbacks=fallback, betas=betas)


MIN_REPLY_TOKENS = 1024
# Estimates run a little under the real count at times: keep that much of the input spare.
ESTIMATE_MARGIN = 1.05


def reply_budget(session: AgentSession, estimate: int, wanted: int) -> int:
    """``max_tokens`` for a request of ``estimate`` input tokens: ``wanted``, cut to the room the
    window leaves (the API refuses input + max_tokens over the window). With less room than
    :data:`MIN_REPLY_TOKENS` it stays ``wanted``: the API's refusal then compacts the context."""
    room = session.context_window - math.ceil(estimate * ESTIMATE_MARGIN)
    return min(wanted, room) if room >= MIN_REPLY_TOKENS else wanted


def with_reply_room(request: LLMRequest, exc: ContextOverflow) -> LLMRequest | None:
    """``request`` with ``max_tokens`` lowered to what the API said is left beside its input,
    when the refusal was about the sum ("input length and `max_tokens` exceed context limit") and
    the room left holds a real answer; else None (the input itself must shrink)."""
    prompt, limit = exc.prompt_tokens, exc.limit_tokens
    if exc.output_tokens is None or prompt is None or limit is None:
        return None
    room = limit - prompt
    if room < min(MIN_REPLY_TOKENS, request.max_tokens) or room >= request.max_tokens:
        return None
    return replace(request, max_tokens=room)
