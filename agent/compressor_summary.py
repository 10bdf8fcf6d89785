"""Phase 3 of compression: asking the summary model for the summary.

A summary cut off at ``max_tokens`` is never accepted (its missing sections would read as
"no active task"): the attempt is retried once with a larger output budget, or, when the
budget is already the model's output cap, with a smaller transcript; cut off again, the
caller falls back to the extractive summary.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from agent.prompts import SUMMARIZER_SYSTEM, serialize_messages, summary_instructions
from agent.provider import LLMProvider, LLMRequest, LLMResponse
from agent.redact import redact
from agent.tokens import cost_usd, model_info
from agent.types import ChatMessage, UsageRecord, text_block

_log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class SummaryJob:
    """What to summarize: the middle's messages, every earlier summary's body, the aim."""

    content: list[ChatMessage]
    previous: str | None
    budget: int
    focus: str | None


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
        max_tokens = job.budget + job.budget // 2
        # Conservative 3 chars/token so the transcript surely fits the summary model's window.
        room_chars = max(20_000, (info.context_window - max_tokens - 4_000) * 3)
        for attempt in (1, 2):
            response = await self._call(job, max_tokens, room_chars)
            records.append(self._record(response))
            text = "\n".join(str(b.get("text", "")) for b in response.content if b.get("type") == "text")
            if response.stop_reason != "max_tokens":
                return redact(text)
            _log.warning("summary cut off at max_tokens=%d (attempt %d): not accepted", max_tokens, attempt)
            if max_tokens < info.max_output:
                max_tokens = min(info.max_output, max_tokens * 2)
            else:
                room_chars //= 2
        return None

    async def _call(self, job: SummaryJob, max_tokens: int, room_chars: int) -> LLMResponse:
        transcript = redact(serialize_messages(job.content, max_chars=room_chars))
        prompt = summary_instructions(
            transcript,
            budget_tokens=job.budget,
            previous_summary=redact(job.previous) if job.previous else None,
            focus=job.focus,
        )
        request = LLMRequest(
            model=self.model,
            messages=[{"role": "user", "content": [text_block(prompt)]}],
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
