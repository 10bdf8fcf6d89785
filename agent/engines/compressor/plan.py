"""The last step of a compaction: the new active view assembled, tool pairs repaired, and the
difference from the old one turned into a :class:`CompactionPlan` (the engine writes no SQL)."""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from agent.context_engine import CompressionOutcome
from agent.engines.compressor.boundaries import Boundaries
from agent.engines.compressor.sizes import Sizes
from agent.tokens import estimate_message_tokens
from agent.transcript import repair_tool_pairs, validate_messages
from agent.types import (
    AgentSession,
    ChatMessage,
    CompactionPlan,
    CompactionStatus,
    ContextState,
    Insertion,
    Trigger,
    UsageRecord,
)

_log = logging.getLogger(__name__)

AWAITING_CHECK = "awaiting_usage_check"
"""Set in the state by a compaction: the next real usage tells whether it got under the threshold."""


@dataclass(frozen=True, slots=True)
class Attempt:
    """One compress() call's fixed inputs, handed to the assembly step."""

    session: AgentSession
    state: ContextState
    originals: Sequence[ChatMessage]
    sizes: Sizes
    before: int
    trigger: Trigger
    focus: str | None
    started: float
    compaction_id: str = field(default_factory=lambda: uuid.uuid4().hex)


def finish(
    attempt: Attempt,
    view: list[ChatMessage],
    summary: ChatMessage | None,
    bounds: Boundaries,
    status: CompactionStatus,
    usage: tuple[UsageRecord, ...],
    reason: str,
    strategy: str = "",
    *,
    summary_model: str,
) -> CompressionOutcome:
    """Assemble the new active view, repair tool pairs, and turn the difference into a plan."""
    session, state, originals, sizes = attempt.session, attempt.state, attempt.originals, attempt.sizes
    before, trigger = attempt.before, attempt.trigger
    if summary is None:
        new_view = list(view)
    else:
        new_view = [*view[: bounds.head_end], summary, *view[bounds.tail_start :]]
    repaired = repair_tool_pairs(new_view)
    if validate_messages(repaired) and not validate_messages(originals):
        _log.error("compaction would leave an invalid transcript", extra={"session": session.id})
        return CompressionOutcome(
            None, "failed", before, before, reason="invalid result", summary_usage=usage
        )

    index_of = {id(m): i for i, m in enumerate(originals)}
    kept_ids = {m.id for m in repaired if id(m) in index_of}
    archive = [m.id for m in originals if m.id is not None and m.id not in kept_ids]
    insertions: list[Insertion] = []
    for m in repaired:
        if id(m) in index_of:
            continue
        anchor = m.id if m.kind != "summary" else originals[bounds.head_end].id
        if anchor is None:
            continue
        # A copy is a new row: the platform's message id stays with the archived original
        # (it is unique per session, and a redelivered message must match the original).
        fresh = replace(
            m,
            id=None,
            seq=None,
            platform_message_id=None,
            active=True,
            compacted=False,
            compaction_id=None,
        )
        insertions.append(Insertion(anchor_id=anchor, message=fresh))
    # Kept originals have their estimates already; only copies and the summary are new.
    rough = [
        sizes.rough[i] if (i := index_of.get(id(m))) is not None else estimate_message_tokens(m)
        for m in repaired
    ]
    after_est = sum(sizes.scaled(r) for r in rough) + sizes.system
    after = min(before, sizes.real(after_est))
    tail = originals[bounds.tail_start :]
    plan = CompactionPlan(
        trigger=trigger,
        archive_ids=tuple(archive),
        insertions=tuple(insertions),
        first_kept_id=tail[0].id if tail else None,
        tokens_before=before,
        tokens_after=after,
        model=(attempt.session.summary_model or summary_model) if summary is not None else "",
        duration_ms=int((time.perf_counter() - attempt.started) * 1000),
        status=status,
        focus=attempt.focus,
        compaction_id=attempt.compaction_id,
        strategy=strategy or ("summary" if summary is not None else "prune"),
    )
    state.compaction_count += 1
    if trigger == "manual":  # an explicit request starts the anti-thrash count afresh
        state.ineffective_strikes, state.strike_context_tokens = 0, None
    state.extra[AWAITING_CHECK] = True
    state.last_prompt_tokens = after
    state.last_prompt_estimate = sum(rough)
    _log.info(
        "compaction planned (%s): %d -> %d tokens, %d archived",
        status,
        before,
        after,
        len(archive),
        extra={"session": session.id, "trigger": trigger, "tokens_before": before, "tokens_after": after},
    )
    return CompressionOutcome(
        plan, status, before, after, reason=reason, summary_usage=usage, strategy=plan.strategy
    )
