"""The ``sliding`` engine: no LLM at all. The oldest whole exchanges go to the archive and a
short deterministic note takes their place, pointing at ``recall`` and ``session_search``.

An exchange runs from a message a person wrote to just before the next one, so a tool_use and
its result always leave together and the latest user message always stays. Earlier notes in the
range are archived with it (they stay recallable); the new note counts everything archived.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime

from agent.clock import utcnow
from agent.context_engine import CompressionOutcome, ContextEngine
from agent.engines import veto_rest
from agent.engines.compressor.boundaries import is_human
from agent.engines.hooks import PreCompact
from agent.settings import CompressionSettings
from agent.tokens import PromptSize, calibrate, estimate_message_tokens, estimate_text_tokens
from agent.types import (
    AgentSession,
    ChatMessage,
    CompactionPlan,
    ContextState,
    Insertion,
    Trigger,
    Usage,
    text_block,
)

TARGET_FRACTION = 0.6
MUST_SHRINK_RATIO = 0.95
NOTE_PREFIX = "[Earlier conversation archived"


def exchange_starts(messages: Sequence[ChatMessage]) -> list[int]:
    """Indexes where an exchange begins (a message a person wrote)."""
    return [i for i, m in enumerate(messages) if is_human(m)]


def sliding_note(compaction_id: str, first_id: int, last_id: int, count: int, earlier: int) -> str:
    """The note in place of the archived exchanges: the same inputs give the same text."""
    total = count + earlier
    more = f" ({total} in all with earlier archives)" if earlier else ""
    return (
        f"{NOTE_PREFIX}: {count} messages, ids {first_id}-{last_id}{more}. They are not summarized. "
        f'To read them call recall {{"compaction_id": "{compaction_id}"}}, or session_search for a topic.]'
    )


def _earlier_count(note: ChatMessage) -> int:
    """How many messages an earlier note said it stood for."""
    text = note.text
    marker = " in all with earlier archives"
    if marker in text:
        head = text.split(marker, 1)[0].rsplit("(", 1)[-1]
        if head.strip().isdigit():
            return int(head.strip())
    words = text.split(": ", 1)[-1].split(" ", 1)[0]
    return int(words) if words.isdigit() else 0


def plan_slide(
    session: AgentSession,
    messages: Sequence[ChatMessage],
    state: ContextState,
    *,
    trigger: Trigger,
    goal_tokens: int,
    clock: Callable[[], datetime] = utcnow,
    strategy: str = "sliding",
) -> tuple[CompactionPlan | None, int, int, list[ChatMessage]]:
    """The plan that drops the fewest oldest exchanges to get under ``goal_tokens`` (estimated),
    keeping at least the latest exchange. Returns (plan, before, after, archived messages)."""
    started = time.perf_counter()
    scale = state.token_scale or 1.0
    system = estimate_text_tokens(session.system_prompt)
    sizes = [estimate_message_tokens(m) * scale for m in messages]
    before = system + int(sum(sizes))
    starts = exchange_starts(messages)
    if len(starts) < 2:
        return None, before, before, []
    # Never cut into what is not persisted yet (it cannot be archived), nor the latest exchange.
    unpersisted = next((i for i, m in enumerate(messages) if m.id is None), len(messages))
    candidates = [i for i in starts[1:] if i <= unpersisted]
    cut = 0
    for index in candidates:
        cut = index
        dropped = sum(sizes[:cut])
        if before - dropped + 80 <= goal_tokens:
            break
    if cut == 0:
        return None, before, before, []
    gone = list(messages[:cut])
    ids = [m.id for m in gone if m.id is not None]
    if not ids:
        return None, before, before, []
    compaction_id = uuid.uuid4().hex
    earlier = sum(_earlier_count(m) for m in gone if m.kind == "summary")
    count = sum(1 for m in gone if m.kind != "summary")
    note = ChatMessage(
        role="user",
        content=[text_block(sliding_note(compaction_id, min(ids), max(ids), count, earlier))],
        kind="summary",
        created_at=clock(),
    )
    after = system + int(sum(sizes[cut:]) + estimate_message_tokens(note) * scale)
    first_kept = messages[cut].id
    plan = CompactionPlan(
        trigger=trigger,
        archive_ids=tuple(ids),
        insertions=(Insertion(anchor_id=ids[0], message=note),),
        first_kept_id=first_kept,
        tokens_before=before,
        tokens_after=min(before, after),
        model="",
        duration_ms=int((time.perf_counter() - started) * 1000),
        status="ok",
        compaction_id=compaction_id,
        strategy=strategy,
    )
    return plan, before, min(before, after), gone


def with_kept_text(plan: CompactionPlan, keep: Sequence[str]) -> CompactionPlan:
    """``plan`` whose note also carries what a pre_compact hook said must stay in view."""
    note = plan.insertions[0]
    text = note.message.text + "\n" + "\n".join(keep)
    kept = Insertion(note.anchor_id, note.message.with_content([text_block(text)]))
    return replace(plan, insertions=(kept, *plan.insertions[1:]))


class SlidingEngine(ContextEngine):
    """See the module docstring. Thresholds and target as the compressor's (``compression:``)."""

    name = "sliding"
    shares_state = True

    def __init__(self, settings: CompressionSettings, *, clock: Callable[[], datetime] = utcnow) -> None:
        self.settings = settings
        self.clock = clock

    def threshold_tokens(self, session: AgentSession, trigger: Trigger = "in_loop") -> int:
        ratio = (
            self.settings.hygiene_threshold_for(session.model)
            if trigger == "hygiene"
            else self.settings.threshold_for(session.model)
        )
        return int(ratio * session.budget_window)

    def should_compress(
        self, session: AgentSession, state: ContextState, prompt_tokens: int, *, trigger: Trigger = "in_loop"
    ) -> bool:
        if trigger in ("reactive", "manual"):
            return True
        if not self.settings.enabled or prompt_tokens < self.threshold_tokens(session, trigger):
            return False
        must_shrink = prompt_tokens >= session.context_window * MUST_SHRINK_RATIO
        return trigger != "in_loop" or must_shrink or not veto_rest.resting(state, prompt_tokens)

    async def compress(
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
        goal = int(self.threshold_tokens(session) * TARGET_FRACTION)
        plan, before, after, gone = plan_slide(
            session, messages, state, trigger=trigger, goal_tokens=goal, clock=self.clock
        )
        if prompt_tokens is not None:
            before = max(before, prompt_tokens)
        if plan is None:
            return CompressionOutcome(
                None, "failed", before, before, reason="nothing to drop", strategy="sliding"
            )
        must_shrink = trigger == "reactive" or before >= session.context_window * MUST_SHRINK_RATIO
        verdict = await self.hooks.run_pre(PreCompact(session, trigger, "sliding", gone, must_shrink))
        if verdict.vetoed:
            return CompressionOutcome(
                None,
                "failed",
                before,
                before,
                reason="vetoed by a pre_compact hook",
                strategy="sliding",
                vetoed=True,
            )
        if verdict.keep:
            plan = with_kept_text(plan, verdict.keep)
        state.compaction_count += 1
        state.last_prompt_tokens = after
        gone_ids = set(plan.archive_ids)
        state.last_prompt_estimate = sum(estimate_message_tokens(m) for m in messages if m.id not in gone_ids)
        return CompressionOutcome(
            plan, "ok", before, after, reason="dropped oldest exchanges", strategy="sliding"
        )

    def on_usage(self, session: AgentSession, state: ContextState, usage: Usage, prompt: PromptSize) -> None:
        real = usage.context_tokens
        if real > 0:
            calibrate(state, prompt, real)
            veto_rest.count_call(state)
            state.last_prompt_tokens = real
            state.last_prompt_estimate = prompt.messages
            state.last_prompt_at = self.clock()
