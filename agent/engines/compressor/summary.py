"""Phase 3 of compression: asking the summary model for the summary.

The request fits the summary model, not the main one: ``max_tokens`` within its output cap,
and the transcript sized with the token estimator (a CJK character is a token) against its
own window, less the reply, the instructions and a safety margin. A prompt the model still
finds too long (alone, or with ``max_tokens`` beside it) is retried once with the transcript cut
by what it reported.

A summary cut off at ``max_tokens`` is never accepted (its missing sections would read as
"no active task"): the attempt is retried once with a larger output budget, or, when the
budget is already the model's output cap, with a smaller transcript; cut off again, the
caller falls back to the extractive summary.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace

from agent.errors import ContextOverflow
from agent.prompts import SUMMARIZER_SYSTEM, serialize_messages, summary_instructions
from agent.provider import LLMProvider, LLMRequest, LLMResponse
from agent.redact import redact
from agent.tokens import cost_usd, estimate_text_tokens, model_info
from agent.types import ChatMessage, UsageRecord, text_block

_log = logging.getLogger(__name__)

# The estimator is rough; a real tokenizer may count more: keep a tenth of the room spare.
ESTIMATE_SAFETY = 0.9
PROMPT_FRAMING_TOKENS = 64
MIN_TRANSCRIPT_TOKENS = 1_000


def _shrunk(room: int, exc: ContextOverflow, max_tokens: int) -> int:
    """A transcript room cut by how far over the limit the API said the prompt was, the reply's
    ``max_tokens`` included (the window holds both)."""
    prompt, limit = exc.prompt_tokens, exc.limit_tokens
    if prompt and limit and prompt + max_tokens > limit:
        over = prompt + max_tokens - limit
        return max(MIN_TRANSCRIPT_TOKENS, int((room - over) * ESTIMATE_SAFETY))
    return max(MIN_TRANSCRIPT_TOKENS, room // 2)


@dataclass(frozen=True, slots=True)
class SummaryJob:
    """What to summarize: the middle's messages, every earlier summary's body, the aim (a focus,
    else the latest user requests)."""

    content: list[ChatMessage]
    previous: str | None
    budget: int
    focus: str | None
    recent_requests: tuple[str, ...] = ()
    keep: tuple[str, ...] = ()
    """Text a pre_compact hook said the summary must keep."""


class Summarizer:
    """Calls the summary model; see the module docstring."""

    def __init__(
        self, provider: LLMProvider, model: str, *, prices: dict[str, tuple[float, float]] | None = None
    ) -> None:
        self.provider = provider
        self.model = model
        self.prices = prices

    async def summarize(self, job: SummaryJob, records: list[UsageRecord]) -> str | None:
        """The summary text, or ``None`` when it was cut off twice. Every call's usage is appended
        to ``records`` (paid for, used or not); provider errors propagate as ``LLMError``."""
        info = model_info(self.model)
        # Redacted once: the prompt is built for sizing and again for each attempt.
        job = replace(
            job,
            previous=redact(job.previous) if job.previous else None,
            focus=redact(job.focus) if job.focus else None,
            recent_requests=tuple(redact(r) for r in job.recent_requests),
            keep=tuple(redact(k) for k in job.keep),
        )
        # The budget the prompt asks for leaves the model half again as much before it is cut off.
        budget = min(job.budget, info.max_output * 2 // 3)
        max_tokens = min(budget + budget // 2, info.max_output)
        room = self._room(job, budget, max_tokens, info.context_window)
        for attempt in (1, 2):
            try:
                response = await self._call(job, budget, max_tokens, room)
            except ContextOverflow as exc:
                if attempt == 2:
                    raise
                # From what was sent, not the room: a transcript that never filled it must shrink too.
                sent = estimate_text_tokens(serialize_messages(job.content, max_tokens=room))
                room = _shrunk(min(room, sent), exc, max_tokens)
                _log.warning("summary prompt too long (%s); retrying with %d transcript tokens", exc, room)
                continue
            records.append(self._record(response))
            text = "\n".join(str(b.get("text", "")) for b in response.content if b.get("type") == "text")
            if response.stop_reason != "max_tokens":
                return redact(text)
            _log.warning("summary cut off at max_tokens=%d (attempt %d): not accepted", max_tokens, attempt)
            if max_tokens < info.max_output:
                max_tokens = min(info.max_output, max_tokens * 2)
            else:
                room //= 2
        return None

    def _prompt(self, job: SummaryJob, budget: int, transcript: str) -> str:
        """The instructions around ``transcript``; ``job``'s texts are already redacted."""
        return summary_instructions(
            transcript,
            budget_tokens=budget,
            previous_summary=job.previous or None,
            focus=job.focus or None,
            recent_requests=job.recent_requests,
            keep=job.keep,
        )

    def _room(self, job: SummaryJob, budget: int, max_tokens: int, window: int) -> int:
        """Transcript tokens that fit the summary model's window beside everything else."""
        fixed = estimate_text_tokens(SUMMARIZER_SYSTEM) + estimate_text_tokens(self._prompt(job, budget, ""))
        free = window - max_tokens - fixed - PROMPT_FRAMING_TOKENS
        return max(MIN_TRANSCRIPT_TOKENS, int(free * ESTIMATE_SAFETY))

    async def _call(self, job: SummaryJob, budget: int, max_tokens: int, room: int) -> LLMResponse:
        transcript = redact(serialize_messages(job.content, max_tokens=room))
        request = LLMRequest(
            model=self.model,
            messages=[{"role": "user", "content": [text_block(self._prompt(job, budget, transcript))]}],
            max_tokens=max_tokens,
            system=[text_block(SUMMARIZER_SYSTEM)],
            purpose="summary",
        )
        return await self.provider.create(request)

    def _record(self, response: LLMResponse) -> UsageRecord:
        model = response.model or self.model
        cost = cost_usd(model, response.usage, prices=self.prices) if response.billed else 0.0
        return UsageRecord(
            model=model,
            purpose="summary",
            usage=response.usage,
            cost_usd=cost,
            estimated=response.estimated_usage,
        )
