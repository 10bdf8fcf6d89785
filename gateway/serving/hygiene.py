"""Session hygiene: the 85% check on the persisted history, before the agent runs.

It fires at ``hygiene_threshold`` (0.85), or at the in-loop threshold for the model when a
deployer set that higher: their 0.9 is not overridden by our 0.85.

It catches what grows while nobody talks to the bot (ambient group messages overnight).
The estimate is the agent's own (:func:`agent.loop_request.estimate_request_tokens`): the
last API-reported prompt size plus the calibrated (else rough) estimate of what was added
since; rough only when no real count exists. Compaction goes through
:func:`agent.compaction.compact` (trigger ``hygiene``), persisting exactly as the in-loop path.

It never loops: one attempt per turn at most; a failure (of the summarizer or of the store),
or a compaction that does not get under the threshold, is a strike that sets a cooldown
(5 min x1, x3, x9, capped at an hour), kept in :class:`ContextState` so it survives restarts.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any, Literal

from agent.clock import Clock, utcnow
from agent.compaction import WhenSlow, compact, with_api_limit
from agent.context_engine import ContextEngine
from agent.errors import CompressionError, LLMError, StoreError
from agent.loop_request import estimate_request_tokens
from agent.settings import CompressionSettings
from agent.storage import ConversationStore
from agent.types import AgentSession, ChatMessage, ContextState
from gateway.outbound.failures import SUMMARIZING

_log = logging.getLogger(__name__)

MIN_MESSAGES = 4
COOLDOWN_BASE_SECONDS = 300.0
COOLDOWN_FACTOR = 3.0
COOLDOWN_CAP_SECONDS = 3600.0

# Sent once when a compaction (hygiene or in-loop) runs longer than a few seconds: the same
# sentence a turn retried because its engine raised CompressionError gets (gateway.outbound.failures).
SUMMARIZING_NOTICE = SUMMARIZING

HygieneStatus = Literal["disabled", "too_few", "below", "cooldown", "compacted", "ineffective", "failed"]


@dataclass(frozen=True, slots=True)
class HygieneReport:
    """What the check decided; ``messages`` is the active view the turn should use."""

    status: HygieneStatus
    messages: list[ChatMessage] = field(repr=False)
    estimate: int
    limit: int
    tokens_after: int | None = None
    archived: int = 0
    error: str | None = None
    state: ContextState | None = field(default=None, repr=False, compare=False)
    """The session's compression state as hygiene left it (the turn goes on from it)."""

    @property
    def compacted(self) -> bool:
        return self.status in ("compacted", "ineffective")

    def notice(self) -> str | None:
        """The one-line chat notice ("compacted 410 messages -> 1 summary + 33"), when one applies."""
        if not self.compacted:
            return None
        summaries = sum(1 for m in self.messages if m.kind == "summary")
        rest = len(self.messages) - summaries
        plural = "summary" if summaries == 1 else "summaries"
        return f"compacted {self.archived} messages -> {summaries} {plural} + {rest}"


def cooldown_for(failures: int) -> timedelta:
    """The ladder: 5 min after the first strike, 15 after the second, 45, then an hour."""
    seconds = COOLDOWN_BASE_SECONDS * COOLDOWN_FACTOR ** max(0, failures - 1)
    return timedelta(seconds=min(COOLDOWN_CAP_SECONDS, seconds))


async def run_hygiene(
    engine: ContextEngine,
    store: ConversationStore,
    session: AgentSession,
    settings: CompressionSettings,
    *,
    messages: list[ChatMessage] | None = None,
    state: ContextState | None = None,
    tools: list[dict[str, Any]] | None = None,
    clock: Clock = utcnow,
    when_slow: WhenSlow | None = None,
) -> HygieneReport:
    """Check the persisted active history and compact it once when it is over the threshold.

    ``messages`` and ``state``, when given, are the active view and compression state the
    caller has just read (in the transaction that appended the turn's messages).
    """
    if messages is None:
        messages = await store.load_active(session.id)
    if state is None:
        state = await store.load_context_state(session.id)
    report = await _check(engine, store, session, settings, messages, state, tools, clock, when_slow)
    if report.status in ("disabled", "too_few", "below", "cooldown"):
        # Nothing was written: the state read above is still the session's (the agent goes on
        # from it instead of reading it again). After a compaction or a strike it is not.
        return replace(report, state=state)
    return report


async def _check(
    engine: ContextEngine,
    store: ConversationStore,
    session: AgentSession,
    settings: CompressionSettings,
    messages: list[ChatMessage],
    state: ContextState,
    tools: list[dict[str, Any]] | None,
    clock: Clock,
    when_slow: WhenSlow | None,
) -> HygieneReport:
    session = with_api_limit(session, state)
    limit = int(settings.hygiene_threshold_for(session.model) * session.budget_window)
    if not settings.enabled:
        return HygieneReport("disabled", messages, 0, limit)
    if len(messages) < MIN_MESSAGES:
        return HygieneReport("too_few", messages, 0, limit)
    estimate = estimate_request_tokens(session, messages, tools or [], state)
    if estimate < limit:
        return HygieneReport("below", messages, estimate, limit)
    now = clock()
    if state.hygiene_cooldown_until is not None and now < state.hygiene_cooldown_until:
        return HygieneReport("cooldown", messages, estimate, limit)
    if not engine.should_compress(session, state, estimate, trigger="hygiene"):
        # The engine's own anti-thrash guard: compacting again would change nothing.
        return HygieneReport("cooldown", messages, estimate, limit)

    log_fields = {"session": session.id, "trigger": "hygiene", "tokens_before": estimate}
    try:
        result = await compact(
            engine,
            store,
            session,
            trigger="hygiene",
            prompt_tokens=estimate,
            messages=messages,
            when_slow=when_slow,
        )
    except (CompressionError, LLMError, StoreError) as exc:
        # A store that refuses the plan (say, an admin restored a compaction meanwhile) is a
        # strike like a failed summary: raised, the worker would retry it every few seconds.
        await _strike(store, session, now)
        _log.warning("hygiene compaction failed: %s", exc, extra=log_fields)
        return HygieneReport("failed", messages, estimate, limit, error=str(exc))
    if result.record is None:
        await _strike(store, session, now)
        reason = result.outcome.reason or result.outcome.status
        _log.warning("hygiene compaction changed nothing: %s", reason, extra=log_fields)
        return HygieneReport("failed", messages, estimate, limit, error=reason)

    state = await store.load_context_state(session.id)
    after = estimate_request_tokens(session, result.messages, tools or [], state)
    archived = result.record.messages_archived
    if after >= limit:
        # Compacted but still over: a strike, so the next turn does not compact again.
        await _strike(store, session, now, state)
        _log.warning(
            "hygiene compaction did not get under the threshold (%d >= %d)",
            after,
            limit,
            extra={**log_fields, "tokens_after": after},
        )
        return HygieneReport("ineffective", result.messages, estimate, limit, after, archived)
    state.hygiene_failures = 0
    state.hygiene_cooldown_until = None
    await store.save_context_state(session.id, state)
    _log.info(
        "hygiene compaction: %d messages archived, %d -> %d tokens",
        archived,
        estimate,
        after,
        extra={**log_fields, "tokens_after": after, "compaction": result.record.id},
    )
    return HygieneReport("compacted", result.messages, estimate, limit, after, archived)


async def _strike(
    store: ConversationStore, session: AgentSession, now: datetime, state: ContextState | None = None
) -> None:
    if state is None:
        state = await store.load_context_state(session.id)
    state.hygiene_failures += 1
    state.hygiene_cooldown_until = now + cooldown_for(state.hygiene_failures)
    await store.save_context_state(session.id, state)
