"""Wire shapes of the API's server-side context management, parsed once at the provider's edge.

Context editing (``clear_tool_uses_20250919``) and the two kinds of compaction (the
``compaction`` request parameter, and the ``compact_20260112`` edit) are documented in
docs/server-side-context.md; this module holds their request/response shapes and the beta
headers, so the provider, the loop and the strategies agree on one spelling.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal, NotRequired, TypedDict

from agent.types import ContentBlock, ContextState, Usage

CONTEXT_MANAGEMENT_BETA = "context-management-2025-06-27"
COMPACTION_BETA = "compact-2026-09-04"
THRESHOLD_COMPACTION_BETA = "compact-2026-01-12"

CLEAR_TOOL_USES: Final = "clear_tool_uses_20250919"
THRESHOLD_COMPACT: Final = "compact_20260112"
COMPACTION_BLOCK = "compaction"


class InputTokens(TypedDict):
    """A token figure of an edit (``trigger``, ``clear_at_least``)."""

    type: Literal["input_tokens"]
    value: int


class ToolUses(TypedDict):
    """How many tool uses an edit keeps."""

    type: Literal["tool_uses"]
    value: int


class ClearToolUsesEdit(TypedDict):
    """The ``clear_tool_uses_20250919`` edit of ``context_management.edits``."""

    type: Literal["clear_tool_uses_20250919"]
    trigger: InputTokens
    keep: ToolUses
    clear_at_least: InputTokens
    exclude_tools: NotRequired[list[str]]
    clear_tool_inputs: bool


class ThresholdCompactEdit(TypedDict):
    """The ``compact_20260112`` edit of ``context_management.edits``."""

    type: Literal["compact_20260112"]
    trigger: InputTokens
    pause_after_compaction: bool
    instructions: NotRequired[str]


class ContextManagement(TypedDict):
    """The request's ``context_management`` parameter."""

    edits: list[ClearToolUsesEdit | ThresholdCompactEdit]


class CompactionParam(TypedDict):
    """The request's ``compaction`` parameter (on-demand compaction)."""

    type: Literal["summarize"]
    instructions: NotRequired[str]


@dataclass(frozen=True, slots=True)
class AppliedEdit:
    """One entry of the response's ``context_management.applied_edits``."""

    type: str
    cleared_input_tokens: int
    cleared_tool_uses: int = 0


@dataclass(frozen=True, slots=True)
class Iteration:
    """One entry of ``usage.iterations``: a ``compaction`` or a ``message`` sampling step."""

    kind: str
    usage: Usage


def parse_applied_edits(raw: Any) -> tuple[AppliedEdit, ...]:
    """``context_management`` of a response (a dict, or None) as :class:`AppliedEdit` values."""
    if not isinstance(raw, dict):
        return ()
    edits = raw.get("applied_edits")
    if not isinstance(edits, list):
        return ()
    return tuple(
        AppliedEdit(
            type=str(edit.get("type", "")),
            cleared_input_tokens=int(edit.get("cleared_input_tokens") or 0),
            cleared_tool_uses=int(edit.get("cleared_tool_uses") or 0),
        )
        for edit in edits
        if isinstance(edit, dict)
    )


def parse_iterations(raw: Any) -> tuple[Iteration, ...]:
    """``usage.iterations`` of a response (a list of dicts, or None) as :class:`Iteration` values."""
    if not isinstance(raw, list):
        return ()
    return tuple(
        Iteration(
            kind=str(item.get("type", "")),
            usage=Usage(
                input_tokens=int(item.get("input_tokens") or 0),
                output_tokens=int(item.get("output_tokens") or 0),
                cache_creation_input_tokens=int(item.get("cache_creation_input_tokens") or 0),
                cache_read_input_tokens=int(item.get("cache_read_input_tokens") or 0),
            ),
        )
        for item in raw
        if isinstance(item, dict)
    )


def is_compaction_block(block: Any) -> bool:
    return isinstance(block, dict) and block.get("type") == COMPACTION_BLOCK


def compaction_blocks(messages: Iterable[dict[str, Any]]) -> list[ContentBlock]:
    """Every ``compaction`` block the wire messages carry, in order."""
    found: list[ContentBlock] = []
    for message in messages:
        content = message.get("content")
        if isinstance(content, list):
            found.extend(b for b in content if is_compaction_block(b))
    return found


def betas_for(messages: Sequence[dict[str, Any]], betas: Iterable[str] = ()) -> tuple[str, ...]:
    """``betas`` plus the header a carried block needs: a signed (on-demand) block needs its beta
    on every request that carries it, else the API does not know the block type."""
    wanted = list(dict.fromkeys(betas))
    for block in compaction_blocks(messages):
        beta = COMPACTION_BETA if "signature" in block else THRESHOLD_COMPACTION_BETA
        if beta not in wanted:
            wanted.append(beta)
    return tuple(wanted)


# ContextState.extra key: per strategy, how often it ran and how many tokens it freed.
STRATEGIES_KEY = "strategies"


def record_strategy_run(
    state: ContextState, name: str, tokens_freed: int, at: str | None = None, **detail: int | str
) -> None:
    """Count one run of strategy ``name`` that freed ``tokens_freed`` in ``state.extra``, so
    ``/context`` can show it."""
    runs = state.extra.setdefault(STRATEGIES_KEY, {})
    entry = runs.setdefault(name, {"runs": 0, "tokens_freed": 0})
    entry["runs"] = int(entry.get("runs", 0)) + 1
    entry["tokens_freed"] = int(entry.get("tokens_freed", 0)) + tokens_freed
    entry["last_tokens_freed"] = tokens_freed
    if at is not None:
        entry["last_at"] = at
    entry.update(detail)
    state.extra["last_strategy"] = name
