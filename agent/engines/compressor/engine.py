"""The default context engine: prune -> boundaries -> summarize -> assemble.

Sizes. ``threshold`` = threshold_for(model) x window (50% by default) fires automatic
compaction (hygiene uses the larger of ``hygiene_threshold`` and that). A compaction aims at
``target`` = ``TARGET_FRACTION`` (0.6) x threshold, so the next automatic trigger is a good
stretch of conversation away; the verbatim tail gets ``target_ratio`` x threshold tokens.

The engine is pure logic over messages: it returns a :class:`CompactionPlan` and updates the
:class:`ContextState` it is given; :func:`agent.compaction.compact` persists both.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from itertools import islice

from agent.bounded import Failed, bounded_await
from agent.clock import Clock, utcnow
from agent.context_engine import CompressionOutcome, ContextEngine
from agent.engines import veto_rest
from agent.engines.compressor.boundaries import (
    Boundaries,
    archived_id_runs,
    choose_boundaries,
    humans_newest_first,
    is_human,
)
from agent.engines.compressor.plan import AWAITING_CHECK, Attempt, finish
from agent.engines.compressor.prune import prune_messages
from agent.engines.compressor.sizes import Sizes, measure, prune_floor, summary_budget
from agent.engines.compressor.summary import Summarizer, SummaryJob
from agent.engines.hooks import PreCompact
from agent.errors import AuthenticationFailed, LLMError, SpendLimitReached
from agent.extractive import extractive_summary_off_loop
from agent.prompts import (
    MEMORY_SECTION,
    SNAPSHOT_CHARS,
    archived_note,
    format_handoff,
    normalize_summary,
    parse_sections,
    strip_handoff,
    task_snapshot,
    without_section,
)
from agent.provider import LLMProvider
from agent.redact import redact
from agent.settings import CompressionSettings
from agent.tokens import (
    PromptSize,
    calibrate,
    estimate_prompt_tokens,
)
from agent.types import (
    AgentSession,
    ChatMessage,
    CompactionStatus,
    ContextState,
    Trigger,
    Usage,
    UsageRecord,
    text_block,
)

_log = logging.getLogger(__name__)

TARGET_FRACTION = 0.6
# From here the next call risks "prompt is too long" (input plus the reply must fit).
MUST_SHRINK_RATIO = 0.95
STRIKES_TO_STOP = 2
# The longest the breaker stays open before it lets one automatic attempt through (half-open).
BREAKER_MAX_SECONDS = 4 * 3600
CONTEXT_CHANGE_RATIO = 1.10


class _OutOfTime(Exception):
    """The compaction step ran past ``context.timeout_seconds``."""


@dataclass(frozen=True, slots=True)
class _Written:
    """A summary body (None: no summary, the session stays as it was), why, and what it cost."""

    body: str | None
    reason: str
    usage: tuple[UsageRecord, ...]
    status: CompactionStatus = "failed"


class ContextCompressor(ContextEngine):
    """Hermes-style compression with soft archival, phase-1 pruning and an extractive fallback."""

    name = "compressor"

    def __init__(
        self,
        settings: CompressionSettings,
        provider: LLMProvider,
        *,
        summary_model: str,
        clock: Clock = utcnow,
        prices: dict[str, tuple[float, float]] | None = None,
        timeout_seconds: float | None = None,
    ) -> None:
        self.settings = settings
        # The outer limit of one compaction step (``context.timeout_seconds``): past it the model's
        # summary is abandoned and the extractive one stands in.
        self.timeout_seconds = timeout_seconds
        self.provider = provider
        self.summary_model = settings.summary_model or summary_model
        self.clock = clock
        self.prices = prices
        self.summarizer = Summarizer(provider, self.summary_model, prices=prices)

    def _summarizer_for(self, session: AgentSession) -> Summarizer:
        """The engine's summarizer, or one on the conversation's own summary model (a chat override)."""
        if session.summary_model and session.summary_model != self.summary_model:
            return Summarizer(self.provider, session.summary_model, prices=self.prices)
        return self.summarizer

    # ---- sizes ---------------------------------------------------------------------------

    def threshold_tokens(self, session: AgentSession, trigger: Trigger = "in_loop") -> int:
        ratio = (
            self.settings.hygiene_threshold_for(session.model)
            if trigger == "hygiene"
            else self.settings.threshold_for(session.model)
        )
        return int(ratio * session.budget_window)

    def target_tokens(self, session: AgentSession) -> int:
        return int(self.threshold_tokens(session) * TARGET_FRACTION)

    def estimate_prompt_tokens(
        self, session: AgentSession, state: ContextState, messages: Sequence[ChatMessage]
    ) -> int:
        """The best guess of the prompt size: the last real count plus growth since, else an estimate."""
        return estimate_prompt_tokens(session.system_prompt, messages, state)

    # ---- when ----------------------------------------------------------------------------

    def _cooling(self, state: ContextState) -> bool:
        """The summarizer rests: a cooldown after a failure, or the breaker's (longer) back-off."""
        return state.cooldown_until is not None and self.clock() < state.cooldown_until

    def _breaker_open(self, state: ContextState) -> bool:
        """Open: too many failures in a row and the back-off is running. Once it has run out the
        breaker is half-open: one automatic attempt goes through; success closes it, failure
        opens it again for twice as long."""
        return state.consecutive_failures >= self.settings.max_consecutive_failures and self._cooling(state)

    def backoff(self, failures: int) -> timedelta:
        """The rest after ``failures`` failures in a row: the cooldown, then once the breaker is
        open cooldown x 2^k for its k-th opening, capped at :data:`BREAKER_MAX_SECONDS`."""
        base = self.settings.cooldown_seconds
        openings = failures - self.settings.max_consecutive_failures + 1
        if openings <= 0:
            return timedelta(seconds=base)
        return timedelta(seconds=max(base, min(BREAKER_MAX_SECONDS, base * 2.0 ** min(openings, 32))))

    @staticmethod
    def _thrashing(state: ContextState, prompt_tokens: int) -> bool:
        """Two compactions in a row failed to get the real size under the threshold, and the
        context has not grown by more than 10% since: compacting again would change nothing."""
        if state.ineffective_strikes < STRIKES_TO_STOP:
            return False
        reference = state.strike_context_tokens
        return reference is None or prompt_tokens <= reference * CONTEXT_CHANGE_RATIO

    def should_compress(
        self, session: AgentSession, state: ContextState, prompt_tokens: int, *, trigger: Trigger = "in_loop"
    ) -> bool:
        if trigger in ("reactive", "manual"):
            return True
        if not self.settings.enabled or prompt_tokens < self.threshold_tokens(session, trigger):
            return False
        if prompt_tokens >= session.context_window:
            return True
        if self._thrashing(state, prompt_tokens):
            return False
        if prompt_tokens >= session.context_window * MUST_SHRINK_RATIO:
            return True  # must shrink: a breaker or cooldown only turns the summary extractive
        if trigger == "hygiene":
            return True  # hygiene keeps its own cooldown ladder (gateway/serving/hygiene.py)
        if veto_rest.resting(state, prompt_tokens):
            return False  # a hook vetoed this very size: asking again would meet the same answer
        return not self._cooling(state)

    def on_usage(self, session: AgentSession, state: ContextState, usage: Usage, prompt: PromptSize) -> None:
        real = usage.context_tokens
        if real <= 0:
            return
        calibrate(state, prompt, real)
        veto_rest.count_call(state)
        state.last_prompt_tokens = real
        state.last_prompt_estimate = prompt.messages
        state.last_prompt_at = self.clock()
        if state.extra.pop(AWAITING_CHECK, False):
            if real >= self.threshold_tokens(session):
                state.ineffective_strikes += 1
                state.strike_context_tokens = real
            else:
                state.ineffective_strikes = 0
                state.strike_context_tokens = None

    # ---- how -----------------------------------------------------------------------------

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
        started = time.perf_counter()
        sizes, before = measure(session, state, messages, prompt_tokens)
        # Only a context that cannot be sent as it is takes the extractive fallback; below that,
        # a failed summary leaves the session as it was and a better one comes after the cooldown.
        must_shrink = trigger == "reactive" or before >= session.context_window * MUST_SHRINK_RATIO
        use_model = trigger == "manual" or not self._cooling(state)
        breaker_was_open = state.consecutive_failures >= self.settings.max_consecutive_failures
        if not use_model and not must_shrink:
            reason = "circuit breaker open" if self._breaker_open(state) else "summarizer cooling down"
            return CompressionOutcome(None, "failed", before, before, reason=reason)
        attempt = Attempt(session, state, messages, sizes, before, trigger, focus, started)

        threshold = self.threshold_tokens(session)
        target_est = sizes.estimate_of(threshold * TARGET_FRACTION)
        bounds = self._bounds(session, messages, sizes)
        head, tail = bounds.head_end, bounds.tail_start
        middle = messages[head:tail]
        has_middle = any(m.kind != "summary" for m in middle)
        prune_chars = self.settings.tool_result_prune_chars
        # Pruning alone is the outcome when there is no middle, or (automatic triggers) when it gets
        # the context under target. Only then is the middle's tool output pruned: a summary archives
        # the middle as it is, so shortening it first would be work thrown away.
        if not has_middle or (trigger != "manual" and prune_floor(sizes, messages, bounds) <= target_est):
            pruned = prune_messages(messages, end=bounds.protect_start, prune_chars=prune_chars)
            changed = set(pruned.changed)
            pruned_size = sizes.system + sum(
                sizes.of(m) if i in changed else sizes.per_message[i] for i, m in enumerate(pruned.messages)
            )
            if pruned.changed and (not has_middle or pruned_size <= target_est):
                return finish(
                    attempt,
                    pruned.messages,
                    None,
                    bounds,
                    "ok",
                    (),
                    "pruned tool output",
                    summary_model=self.summary_model,
                )
            if not has_middle:
                return CompressionOutcome(None, "failed", before, before, reason="nothing to compress")
        # What stays verbatim (the head, the tail before where the token budget began) is pruned.
        view = prune_messages(
            messages, end=bounds.protect_start, prune_chars=prune_chars, skip=range(head, tail)
        ).messages

        # Every earlier summary in the range, oldest first: each carries part of the story (the
        # memory index is not part of it: it is written afresh below).
        previous = "\n\n".join(
            without_section(strip_handoff(m.text), MEMORY_SECTION) for m in middle if m.kind == "summary"
        )
        stamps = [m.created_at for m in middle if m.created_at is not None]
        archived = archived_note(
            attempt.compaction_id,
            archived_id_runs(middle),
            len(middle),
            since=min(stamps, default=None),
            until=max(stamps, default=None),
            previous=parse_sections(previous).get("Archived") if previous else None,
        )
        content = [m for m in middle if m.kind != "summary"]
        budget = summary_budget(
            sum(sizes.per_message[bounds.head_end : bounds.tail_start]), session.context_window
        )
        # No focus given: the last three things the user asked say what the summary must serve.
        recent = () if focus else tuple(reversed([m.text for m in islice(humans_newest_first(messages), 3)]))
        verdict = await self.hooks.run_pre(PreCompact(session, trigger, "summary", middle, must_shrink))
        if verdict.vetoed:
            return CompressionOutcome(
                None,
                "failed",
                before,
                before,
                reason="vetoed by a pre_compact hook",
                strategy="summary",
                vetoed=True,
            )
        job = SummaryJob(content, previous or None, budget, focus, recent, keep=verdict.keep)
        written = await self._write(attempt, job, use_model=use_model, must_shrink=must_shrink)
        if written.body is None:
            return CompressionOutcome(
                None,
                "failed",
                before,
                before,
                reason=written.reason,
                summary_usage=written.usage,
                strategy="summary",
            )
        body = written.body
        if written.status == "fallback" and verdict.keep:
            # The extractive summary cannot be told what to keep: the hook's text goes in as it is.
            body = body + "\n\n" + "\n\n".join(verdict.keep)
        newest = next((m for m in reversed(content) if is_human(m)), None)
        task = task_snapshot(newest.text, min(SNAPSHOT_CHARS, 2 * budget)) if newest is not None else None
        text = normalize_summary(body, archived, task=task, memory=memory_index)
        summary = ChatMessage(
            role="user", content=[text_block(format_handoff(text))], kind="summary", created_at=self.clock()
        )
        outcome = finish(
            attempt,
            view,
            summary,
            bounds,
            written.status,
            written.usage,
            written.reason,
            summary_model=self.summary_model,
        )
        # A model summary closes the breaker; so does a fallback that got the context under target
        # while the breaker was open (below the limit, the count of model failures goes on).
        under_target = outcome.tokens_after <= threshold * TARGET_FRACTION
        if outcome.plan is not None and (written.status == "ok" or (breaker_was_open and under_target)):
            state.consecutive_failures, state.cooldown_until = 0, None
        return outcome

    def _bounds(self, session: AgentSession, messages: Sequence[ChatMessage], sizes: Sizes) -> Boundaries:
        threshold = self.threshold_tokens(session)
        target_est = sizes.estimate_of(threshold * TARGET_FRACTION)
        return choose_boundaries(
            messages,
            sizes.per_message,
            protect_head=self.settings.protect_first_n > 0,
            tail_budget=sizes.estimate_of(threshold * self.settings.target_ratio),
            tail_floor=self.settings.protect_last_n,
            tail_cap=int(target_est * 0.75),
            min_tail_users=self.settings.min_tail_user_messages,
        )

    async def prune_tool_output(
        self,
        session: AgentSession,
        messages: list[ChatMessage],
        state: ContextState,
        *,
        prompt_tokens: int | None = None,
        trigger: Trigger = "in_loop",
        strategy: str = "prune",
    ) -> CompressionOutcome:
        """The no-call pass: old tool output outside the protected tail becomes one line each
        (the originals are archived, recallable)."""
        started = time.perf_counter()
        sizes, before = measure(session, state, messages, prompt_tokens)
        bounds = self._bounds(session, messages, sizes)
        pruned = prune_messages(
            messages, end=bounds.protect_start, prune_chars=self.settings.tool_result_prune_chars
        )
        if not pruned.changed:
            return CompressionOutcome(
                None, "failed", before, before, reason="no old tool output", strategy=strategy
            )
        attempt = Attempt(session, state, messages, sizes, before, trigger, None, started)
        return finish(
            attempt,
            pruned.messages,
            None,
            bounds,
            "ok",
            (),
            "pruned tool output",
            strategy,
            summary_model=self.summary_model,
        )

    async def _write(
        self, attempt: Attempt, job: SummaryJob, *, use_model: bool, must_shrink: bool
    ) -> _Written:
        """The summary body: the model's; else, when the context must shrink or the model could
        not fit the summary, the extractive one; else none (the session stays as it was)."""
        records: list[UsageRecord] = []
        body: str | None = None
        reason = "summarizer paused (breaker or cooldown)"
        cut_off = False
        log_fields = {"session": attempt.session.id, "trigger": attempt.trigger}
        timed_out = False
        if use_model:
            try:
                body = await self._summary_in_time(attempt, job, records)
            except _OutOfTime as exc:
                timed_out, reason = True, str(exc)
                self._record_failure(attempt.state)
                _log.warning("%s: the extractive summary stands in", reason, extra=log_fields)
            except (AuthenticationFailed, SpendLimitReached) as exc:
                _log.warning("compaction aborted: %s", exc, extra=log_fields)
                return _Written(None, f"summarizer refused: {exc}", tuple(records))
            except LLMError as exc:
                reason = f"summarizer failed: {exc}"
                self._record_failure(attempt.state)
                _log.warning("%s", reason, extra=log_fields)
            else:
                if body is None:
                    # The model answers but cannot fit this summary: not an outage, so no strike,
                    # and waiting would not help: the extractive summary stands in now.
                    cut_off, reason = True, "summary cut off at max_tokens twice"
                elif not body.strip():
                    body, reason = None, "summarizer returned an empty summary"
                    self._record_failure(attempt.state)
        usage = tuple(records)
        if body is not None:
            return _Written(body, "summarized", usage, "ok")
        if not (must_shrink or cut_off or timed_out):
            return _Written(None, reason, usage)
        fallback = await extractive_summary_off_loop(
            job.content, budget_tokens=job.budget, previous_summary=job.previous
        )
        return _Written(redact(fallback), reason, usage, "fallback")

    async def _summary_in_time(
        self, attempt: Attempt, job: SummaryJob, records: list[UsageRecord]
    ) -> str | None:
        """The model's summary within what is left of the step's time limit; _OutOfTime past it."""
        work = self._summarizer_for(attempt.session).summarize(job, records)
        if self.timeout_seconds is None:
            return await work
        left = self.timeout_seconds - (time.perf_counter() - attempt.started)
        outcome = await bounded_await(work, max(0.0, left))
        if isinstance(outcome, Failed):
            if outcome.kind == "timeout":
                raise _OutOfTime(
                    f"compaction past its {self.timeout_seconds:g} s limit (context.timeout_seconds)"
                )
            assert outcome.error is not None
            raise outcome.error
        return outcome.value

    def on_failure(self, session: AgentSession, state: ContextState, reason: str) -> None:
        """A plan the store refused is a failure like a failed summary: cooldown, breaker count."""
        self._record_failure(state)

    def _record_failure(self, state: ContextState) -> None:
        state.consecutive_failures += 1
        state.cooldown_until = self.clock() + self.backoff(state.consecutive_failures)
