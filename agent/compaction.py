"""The one compaction operation every trigger uses (hygiene, in-loop, reactive, manual, scheduled).

Load state and the active view, let the engine plan, persist the plan in one store
transaction, record what the summarizer cost, save the state. A failed attempt changes no
message: only the bookkeeping (cooldown, breaker) is saved.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace

from agent.context_engine import CompressionOutcome, ContextEngine
from agent.errors import StoreError
from agent.storage import ConversationStore
from agent.types import AgentSession, ChatMessage, CompactionRecord, ContextState, MemoryEntry, Trigger

_log = logging.getLogger(__name__)

# ContextState.extra key: the limit the API itself reported in a "prompt is too long" error.
API_LIMIT_KEY = "api_context_limit"


def learn_api_limit(state: ContextState, limit_tokens: int | None) -> None:
    """Remember the real limit from "prompt is too long: N tokens > M maximum" (it can be
    lower than the nominal window, or than a mistaken HYGIEIA_CONTEXT_WINDOW)."""
    if limit_tokens is not None and limit_tokens > 0:
        known = state.extra.get(API_LIMIT_KEY)
        state.extra[API_LIMIT_KEY] = min(limit_tokens, known) if isinstance(known, int) else limit_tokens


def with_api_limit(session: AgentSession, state: ContextState) -> AgentSession:
    """``session`` with its window lowered to the API-reported limit when that is smaller."""
    limit = state.extra.get(API_LIMIT_KEY)
    if isinstance(limit, int) and 0 < limit < session.context_window:
        return replace(session, context_window=limit)
    return session


@dataclass(frozen=True, slots=True)
class CompactionResult:
    """What :func:`compact` did: the stored record (None when nothing changed), the new active view."""

    record: CompactionRecord | None
    messages: list[ChatMessage]
    outcome: CompressionOutcome


MEMORY_INDEX_ENTRIES = 40
MEMORY_TITLE_CHARS = 100


def memory_index(entries: Sequence[MemoryEntry]) -> str | None:
    """What ``/memories`` holds, one line a note (path and first line), for a summary: durable
    notes stay in view after the turns that wrote them are archived. None when there are none."""
    if not entries:
        return None
    lines = ["- Durable notes kept with the memory tool (`view` a path for the whole note):"]
    for entry in entries[:MEMORY_INDEX_ENTRIES]:
        first = next((line.strip() for line in entry.content.splitlines() if line.strip()), "")
        if len(first) > MEMORY_TITLE_CHARS:
            first = first[: MEMORY_TITLE_CHARS - 1] + "…"
        lines.append(f"  - {entry.path}" + (f" — {first}" if first else ""))
    if len(entries) > MEMORY_INDEX_ENTRIES:
        lines.append(f"  - … and {len(entries) - MEMORY_INDEX_ENTRIES} more: `view` /memories for the list")
    return "\n".join(lines)


SlowNotice = Callable[[], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class WhenSlow:
    """Call ``notify`` once if a compaction is still running after ``after`` seconds (the chat
    is told the earlier conversation is being summarized)."""

    notify: SlowNotice
    after: float


async def _compress_watched(
    work: Awaitable[CompressionOutcome], when_slow: WhenSlow | None
) -> CompressionOutcome:
    if when_slow is None:
        return await work
    task = asyncio.ensure_future(work)
    try:
        done, _ = await asyncio.wait({task}, timeout=when_slow.after)
        if not done:
            try:
                await when_slow.notify()
            except Exception:  # a notice that cannot be sent must not stop the compaction
                _log.exception("could not send the summarizing notice")
        return await task
    finally:
        task.cancel()  # no-op once done; a cancelled caller takes the compaction down with it


async def compact(
    engine: ContextEngine,
    store: ConversationStore,
    session: AgentSession,
    *,
    trigger: Trigger,
    focus: str | None = None,
    prompt_tokens: int | None = None,
    messages: list[ChatMessage] | None = None,
    when_slow: WhenSlow | None = None,
    memory_scope: str | None = None,
) -> CompactionResult:
    """Compress ``session`` now. ``messages`` (the persisted active view) is loaded when not given;
    the memory index of ``memory_scope`` (by default the session's key, as the loop's) goes
    into the summary."""
    state = await store.load_context_state(session.id)
    session = with_api_limit(session, state)
    view = messages if messages is not None else await store.load_active(session.id)
    index = memory_index(await store.memory_list(memory_scope or session.key or session.id))
    outcome = await _compress_watched(
        engine.compress(
            session,
            view,
            state,
            trigger=trigger,
            focus=focus,
            prompt_tokens=prompt_tokens,
            memory_index=index,
        ),
        when_slow,
    )
    # The summarizer was paid whether or not its summary is used.
    for record in outcome.summary_usage:
        await store.record_usage(session.id, record)
    stored: CompactionRecord | None = None
    if outcome.plan is not None:
        try:
            stored = await store.archive_and_summarize(session.id, outcome.plan)
        except StoreError as exc:
            # The store refused the plan (an admin restored a compaction meanwhile, say): a failed
            # compaction like a failed summary, never an aborted turn that is retried and refused
            # again. Nothing changed; the active view is read afresh, since it may have moved.
            engine.on_failure(session, state, f"store refused the plan: {exc}")
            outcome = replace(outcome, plan=None, status="failed", reason=f"store refused the plan: {exc}")
            _log.warning(
                "compaction refused by the store: %s",
                exc,
                extra={"session": session.id, "trigger": trigger, "tokens_before": outcome.tokens_before},
            )
        view = await store.load_active(session.id)
    if outcome.plan is None:
        _log.info(
            "compaction skipped: %s",
            outcome.reason,
            extra={"session": session.id, "trigger": trigger, "tokens_before": outcome.tokens_before},
        )
    await store.save_context_state(session.id, state)
    return CompactionResult(record=stored, messages=view, outcome=outcome)
