"""The rest after a pre_compact veto: the same question is not asked again at every tool step.

A veto leaves the view as it was, so the next in-loop check would find it over the threshold
again and call the hooks again, once or twice per model call of the turn. After a veto the
in-loop trigger stays quiet until the prompt has grown by :data:`VETO_RETRY_GROWTH` or
:data:`VETO_RETRY_CALLS` model calls have passed; then the hooks are asked once more. A
must-shrink compaction (where a veto is refused anyway), hygiene, manual and reactive
compactions do not wait. The marker lives in ``ContextState.extra`` (persisted per session).
"""

from __future__ import annotations

from agent.types import ContextState

VETO_KEY = "pre_compact_veto"
VETO_RETRY_GROWTH = 1.10
"""Ask again once the prompt is this much bigger than when the veto came."""
VETO_RETRY_CALLS = 8
"""... or after this many model calls, whatever the size."""


def note_veto(state: ContextState, prompt_tokens: int) -> None:
    """A pre_compact hook vetoed a compaction of a ``prompt_tokens`` prompt."""
    state.extra[VETO_KEY] = {"tokens": max(0, prompt_tokens), "calls": 0}


def clear_veto(state: ContextState) -> None:
    """A compaction went through: nothing to rest from."""
    state.extra.pop(VETO_KEY, None)


def count_call(state: ContextState) -> None:
    """One more model call since the veto (called from the engine's ``on_usage``)."""
    marker = state.extra.get(VETO_KEY)
    if isinstance(marker, dict):
        marker["calls"] = int(marker.get("calls", 0)) + 1


def resting(state: ContextState, prompt_tokens: int) -> bool:
    """Whether an in-loop compaction of a ``prompt_tokens`` prompt would only meet the same veto."""
    marker = state.extra.get(VETO_KEY)
    if not isinstance(marker, dict):
        return False
    grown = prompt_tokens > int(marker.get("tokens", 0)) * VETO_RETRY_GROWTH
    return not grown and int(marker.get("calls", 0)) < VETO_RETRY_CALLS
