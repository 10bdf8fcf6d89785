"""The one validator every plan passes before the store applies it, whichever engine made it.

A plan is refused when the active view it leaves would break the API's rules (a tool_use
without its tool_result, a result without its use), when it drops the latest message a person
wrote (only an explicit snip may), when it names a message outside the view, or when the view
it leaves is over the window (unless it was already and the plan shrinks it). A request-only
projection (``select_context``) is held to the same rules by :func:`validate_projection`.
"""

from __future__ import annotations

from collections.abc import Sequence

from agent.engines.compressor.boundaries import humans_newest_first
from agent.tokens import estimate_message_tokens, estimate_text_tokens
from agent.transcript import validate_messages
from agent.types import AgentSession, ChatMessage, CompactionPlan, ContextState

# Strategies a person asked for: they may archive the latest user message on purpose.
EXPLICIT_STRATEGIES = frozenset({"snip"})


def apply_plan(view: Sequence[ChatMessage], plan: CompactionPlan) -> list[ChatMessage]:
    """The active view ``plan`` leaves, as the store would order it: each insertion takes its
    anchor's place (after the anchor when the anchor stays)."""
    archived = set(plan.archive_ids)
    placed: dict[int, list[ChatMessage]] = {}
    for insertion in plan.insertions:
        placed.setdefault(insertion.anchor_id, []).append(insertion.message)
    out: list[ChatMessage] = []
    for m in view:
        if m.id is None or m.id not in archived:
            out.append(m)
        if m.id is not None:
            out.extend(placed.get(m.id, ()))
    return out


def view_tokens(session: AgentSession, state: ContextState, messages: Sequence[ChatMessage]) -> int:
    """The estimated prompt size of ``messages`` (calibrated when the session has a scale)."""
    rough = sum(estimate_message_tokens(m) for m in messages)
    scaled = rough * state.token_scale if state.token_scale else rough
    return estimate_text_tokens(session.system_prompt) + int(scaled)


def _latest_human_kept(before: Sequence[ChatMessage], after: Sequence[ChatMessage]) -> bool:
    latest = next(humans_newest_first(before), None)
    if latest is None:
        return True
    if latest.id is None:
        return any(m is latest for m in after)
    return any(m.id == latest.id for m in after)


def validate_projection(
    session: AgentSession,
    state: ContextState,
    before: Sequence[ChatMessage],
    after: Sequence[ChatMessage],
) -> list[str]:
    """Problems of a view about to be sent in place of ``before`` (empty: it may be sent)."""
    problems: list[str] = []
    if not after:
        return ["the view is empty"]
    if not validate_messages(before):
        problems += validate_messages(after)
    if not _latest_human_kept(before, after):
        problems.append("the latest user message was dropped")
    size = view_tokens(session, state, after)
    if size > session.context_window:
        # Over the window is refused, unless the view was over it already and the plan shrinks
        # it (a long pasted brief may not fit any plan; making it smaller still helps the retry).
        was = view_tokens(session, state, before)
        if was <= session.context_window or size >= was:
            problems.append(f"the view is over the window ({size} > {session.context_window} tokens)")
    return problems


def validate_plan(
    session: AgentSession,
    state: ContextState,
    view: Sequence[ChatMessage],
    plan: CompactionPlan,
) -> list[str]:
    """Problems of ``plan`` over the active ``view`` it was made from (empty: it may be applied)."""
    problems: list[str] = []
    ids = {m.id for m in view if m.id is not None}
    outside = sorted({*plan.archive_ids, *(i.anchor_id for i in plan.insertions)} - ids)
    if outside:
        problems.append(f"the plan names messages outside the active view: {outside[:5]}")
    if len(set(plan.archive_ids)) != len(plan.archive_ids):
        problems.append("the plan archives a message twice")
    if any(i.message.id is not None for i in plan.insertions):
        problems.append("an insertion reuses a stored message id")
    if problems:
        return problems
    after = apply_plan(view, plan)
    if not after and view:
        return ["the plan empties the active view"]
    if after and not validate_messages(view):
        problems += validate_messages(after)
    if plan.strategy not in EXPLICIT_STRATEGIES and not _latest_human_kept(view, after):
        problems.append("the latest user message was dropped")
    size = view_tokens(session, state, after)
    if size > session.context_window:
        # Over the window is refused, unless the view was over it already and the plan shrinks
        # it (a long pasted brief may not fit any plan; making it smaller still helps the retry).
        was = view_tokens(session, state, view)
        if was <= session.context_window or size >= was:
            problems.append(f"the view is over the window ({size} > {session.context_window} tokens)")
    return problems
