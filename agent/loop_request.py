"""Building one Messages API request from the active view, and estimating its size.

The system prompt is the session's, frozen: one text block, never rewritten, so the
cached prefix (tools -> system -> messages) stays byte-identical across turns.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from agent.errors import ContextOverflow, InvalidRequest
from agent.prompt_caching import apply_cache_control, choose_ttl
from agent.provider import LLMRequest
from agent.tokens import estimate_prompt_tokens
from agent.transcript import repair_tool_pairs, validate_wire
from agent.types import AgentSession, ChatMessage, ContentBlock, ContextState, text_block

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


def turn_ttl(setting: str, view: Sequence[ChatMessage]) -> str:
    """The cache TTL for this turn ("auto" looks at how far apart the user's messages are)."""
    times = [
        m.created_at
        for m in view
        if m.role == "user" and m.created_at is not None and m.kind == "message" and not m.tool_result_ids()
    ]
    return choose_ttl(setting, times)


def build_request(
    session: AgentSession,
    view: list[ChatMessage],
    tools: list[dict[str, Any]],
    *,
    max_tokens: int,
    cache_ttl: str | None,
) -> tuple[LLMRequest, list[ChatMessage]]:
    """The request for ``view``, checked with the API's rules; returns it with the view it was
    built from (repaired, loudly, in the should-never-happen case that the view was invalid)."""
    for attempt in range(2):
        system = system_blocks(session)
        messages = [m.to_wire() for m in view]
        if cache_ttl is not None:
            system, messages = apply_cache_control(system, messages, ttl=cache_ttl)
        problems = validate_wire(messages, system, tools)
        if not problems:
            request = LLMRequest(
                model=session.model, messages=messages, max_tokens=max_tokens, system=system, tools=tools
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
