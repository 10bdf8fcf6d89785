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

from agent.context_engine import CompressionOutcome, CompressionSteps, ContextEngine
from agent.context_plan import validate_plan
from agent.engines.strategies.snip import SnipRefused, in_range, last_exchanges, snip_plan
from agent.engines.veto_rest import clear_veto, note_veto
from agent.errors import StoreError
from agent.storage import ConversationStore
from agent.tokens import bind_model
from agent.types import (
    AgentSession,
    ChatMessage,
    CompactionRecord,
    ContextState,
    EngineFailure,
    MemoryEntry,
    Trigger,
)

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
    """``session`` with its window lowered to the API-reported limit when that is smaller.

    First the state is bound to the session's model: a limit, token scale or real prompt size
    learned on another model is forgotten (:func:`agent.tokens.bind_model`)."""
    bind_model(state, session.model, learned=(API_LIMIT_KEY,))
    limit = state.extra.get(API_LIMIT_KEY)
    if isinstance(limit, int) and 0 < limit < session.context_window:
        return replace(session, context_window=limit)
    return session


@dataclass(frozen=True, slots=True)
class CompactionResult:
    """What :func:`compact` did: the last stored record (None when nothing changed), the new active view."""

    record: CompactionRecord | None
    messages: list[ChatMessage]
    outcome: CompressionOutcome
    records: tuple[CompactionRecord, ...] = ()
    """Every compaction stored, one per strategy that ran (``record`` is the last)."""


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
EndNotice = Callable[[Trigger, int | None], Awaitable[None]]
"""Told how many messages a compaction archived, or None when it failed (nothing was summarized)."""


@dataclass(frozen=True, slots=True)
class WhenSlow:
    """What the chat is told about a compaction run on its behalf.

    ``notify`` once if it is still running after ``after`` seconds; ``on_end`` after it, with the
    messages archived, or None when it had to summarize and could not (a step that found nothing to
    do is no failure). A notice that cannot be sent never stops the compaction.
    """

    notify: SlowNotice
    after: float
    on_end: EndNotice | None = None


# Steps that find nothing to do report "failed" too; only a step that had to summarize and could not
# leaves the conversation unsummarized (what the chat is told about).
NO_OP_STRATEGIES = frozenset({"snip", "prune", "cold_prune"})


def _gives_up(outcome: CompressionOutcome) -> bool:
    return bool(outcome.engine_failures) or outcome.strategy not in NO_OP_STRATEGIES


async def _tell_end(when_slow: WhenSlow | None, trigger: Trigger, archived: int | None) -> None:
    if when_slow is None or when_slow.on_end is None:
        return
    try:
        await when_slow.on_end(trigger, archived)
    except Exception:  # a notice that cannot be sent must not hide the compaction's own outcome
        _log.exception("could not send the compaction notice")


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


MAX_STEPS = 8


async def _next_step(
    steps: CompressionSteps, sent: list[ChatMessage] | None, when_slow: WhenSlow | None
) -> CompressionOutcome | None:
    """The engine's next plan (``sent``: the view after the previous one), None when it is done."""
    try:
        work = anext(steps) if sent is None else steps.asend(sent)
        return await _compress_watched(work, when_slow)
    except StopAsyncIteration:
        return None


def _merged(first: CompressionOutcome, last: CompressionOutcome, applied: int) -> CompressionOutcome:
    """One outcome for the caller: from the first step's size to the last applied step's."""
    if applied <= 1:
        return last
    return replace(last, tokens_before=first.tokens_before)


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
    into the summary. The engine's steps run cheapest first; each plan passes
    :func:`agent.context_plan.validate_plan` before the store applies it."""
    state = await store.load_context_state(session.id)
    session = with_api_limit(session, state)
    view = messages if messages is not None else await store.load_active(session.id)
    index = memory_index(await store.memory_list(memory_scope or session.key or session.id))
    steps = engine.compress_steps(
        session,
        view,
        state,
        trigger=trigger,
        focus=focus,
        prompt_tokens=prompt_tokens,
        memory_index=index,
    )
    records: list[CompactionRecord] = []
    first: CompressionOutcome | None = None
    last_applied: CompressionOutcome | None = None
    outcome: CompressionOutcome | None = None
    sent: list[ChatMessage] | None = None
    gave_up = False
    vetoed = False
    try:
        for _ in range(MAX_STEPS):
            step = await _next_step(steps, sent, when_slow if sent is None else None)
            if step is None:
                break
            outcome = step
            first = first or outcome
            gave_up = gave_up or (outcome.plan is None and outcome.status == "failed" and _gives_up(outcome))
            vetoed = vetoed or outcome.vetoed
            for failure in outcome.engine_failures:
                await store.record_engine_failure(session.id, failure)
            # The summarizer was paid whether or not its summary is used.
            for usage in outcome.summary_usage:
                await store.record_usage(session.id, usage)
            if outcome.plan is not None:
                outcome, stored = await _apply(engine, store, session, state, view, outcome)
                if stored is not None:
                    records.append(stored)
                    last_applied = outcome
                    await engine.hooks.run_post(stored)
                view = await store.load_active(session.id)
            else:
                _log.debug(
                    "compaction step skipped: %s",
                    outcome.reason,
                    extra={"session": session.id, "trigger": trigger, "tokens_before": outcome.tokens_before},
                )
            sent = view
    except Exception:
        await _tell_end(when_slow, trigger, None)
        raise
    finally:
        await steps.aclose()
    if records:
        clear_veto(state)
    elif vetoed and trigger not in ("manual", "reactive"):
        note_veto(state, max(prompt_tokens or 0, first.tokens_before if first else 0))
    await store.save_context_state(session.id, state)
    if outcome is None:
        outcome = CompressionOutcome(None, "failed", 0, 0, reason="the engine planned nothing")
    final = _merged(first or outcome, last_applied or outcome, len(records))
    if records:
        await _tell_end(when_slow, trigger, sum(r.messages_archived for r in records))
    elif gave_up:
        await _tell_end(when_slow, trigger, None)
    return CompactionResult(
        record=records[-1] if records else None, messages=view, outcome=final, records=tuple(records)
    )


async def _apply(
    engine: ContextEngine,
    store: ConversationStore,
    session: AgentSession,
    state: ContextState,
    view: list[ChatMessage],
    outcome: CompressionOutcome,
) -> tuple[CompressionOutcome, CompactionRecord | None]:
    """Validate and store one step's plan; a refused plan changes nothing and counts as a failure."""
    plan = outcome.plan
    assert plan is not None
    fields = {"session": session.id, "trigger": plan.trigger, "tokens_before": outcome.tokens_before}
    problems = validate_plan(session, state, view, plan)
    if problems:
        reason = "invalid plan: " + "; ".join(problems)
        _log.error("compaction refused by the plan validator: %s", reason, extra=fields)
        await store.record_engine_failure(
            session.id, EngineFailure(engine.name, "compress", "invalid", reason)
        )
        engine.on_failure(session, state, reason)
        return replace(outcome, plan=None, status="failed", reason=reason), None
    try:
        return outcome, await store.archive_and_summarize(session.id, plan)
    except StoreError as exc:
        # The store refused the plan (an admin restored a compaction meanwhile, say): a failed
        # compaction like a failed summary, never an aborted turn that is retried and refused
        # again. Nothing changed; the active view is read afresh, since it may have moved.
        engine.on_failure(session, state, f"store refused the plan: {exc}")
        _log.warning("compaction refused by the store: %s", exc, extra=fields)
        return replace(outcome, plan=None, status="failed", reason=f"store refused the plan: {exc}"), None


async def forget(
    engine: ContextEngine,
    store: ConversationStore,
    session: AgentSession,
    *,
    last: int | None = None,
    from_id: int | None = None,
    to_id: int | None = None,
) -> CompactionResult:
    """Snip: archive the last ``last`` exchanges, or the messages ``from_id``..``to_id``, from the
    active view (soft, like a compaction: searchable, recallable, undone by restoring it). Raises
    :class:`agent.engines.strategies.snip.SnipRefused` when there is nothing there or the range
    would split a tool call from its result."""
    state = await store.load_context_state(session.id)
    view = await store.load_active(session.id)
    if from_id is not None or to_id is not None:
        chosen = in_range(view, from_id or 0, to_id if to_id is not None else 2**62)
    else:
        chosen = last_exchanges(view, last or 1)
    plan = snip_plan(session, view, chosen)
    outcome = CompressionOutcome(
        plan, "ok", plan.tokens_before, plan.tokens_after, reason="forgotten on request", strategy="snip"
    )
    outcome, stored = await _apply(engine, store, session, state, view, outcome)
    if stored is None:
        raise SnipRefused(outcome.reason)
    await engine.hooks.run_post(stored)
    await store.save_context_state(session.id, state)
    view = await store.load_active(session.id)
    return CompactionResult(record=stored, messages=view, outcome=outcome, records=(stored,))
