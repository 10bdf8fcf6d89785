"""The offline provider: deterministic, no network, used only when no API key is configured.

It says plainly that it is offline and acknowledges the latest message; asked for a summary,
it returns the extractive summary of the transcript in the request (the same code as the
compressor's fallback). Usage is estimated, and flagged so.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

from agent.extractive import extractive_summary_off_loop
from agent.llm_stream import TextSink
from agent.prompts import extract_tagged, parse_transcript, strip_handoff
from agent.provider import LLMRequest, LLMResponse
from agent.tokens import estimate_text_tokens
from agent.types import ChatMessage, Usage, content_text, text_block

# The gateway prefixes user messages with "[name, HH:MM UTC] "; the echo quotes the words only.
_AUTHOR_HEADER = re.compile(r"^\[[^\]\n]{1,80}, \d{2}:\d{2} UTC\] ?")
OFFLINE_NOTICE = "[offline] No API key is configured, so no model is answering yet — I got your message"
_QUOTE_CHARS = 300


def _wire_text(message: dict[str, Any], *, words_only: bool = False) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    blocks = [b for b in content if isinstance(b, dict)]
    if words_only:
        blocks = [b for b in blocks if b.get("type") == "text"]
    return content_text(blocks)


def _latest_words(request: LLMRequest) -> str:
    """What the person said last: the latest user message that has text (tool results skipped)."""
    for message in reversed(request.messages):
        if message.get("role") == "user":
            text = _wire_text(message, words_only=True).strip()
            if text:
                return text
    return ""


def _prompt_tokens(request: LLMRequest) -> int:
    system = "\n".join(str(b.get("text", "")) for b in request.system)
    chars = [_wire_text(m) for m in request.messages]
    return estimate_text_tokens(system) + sum(estimate_text_tokens(c) + 4 for c in chars)


class OfflineProvider:
    """An :class:`agent.provider.LLMProvider` that answers without a model."""

    name = "offline"

    async def create(self, request: LLMRequest) -> LLMResponse:
        text = await self._summary(request) if request.purpose == "summary" else self._reply(request)
        usage = Usage(input_tokens=_prompt_tokens(request), output_tokens=estimate_text_tokens(text))
        return LLMResponse(
            content=[text_block(text)],
            stop_reason="end_turn",
            usage=usage,
            model=request.model,
            estimated_usage=True,
            billed=False,
        )

    async def stream(self, request: LLMRequest, on_text: TextSink) -> LLMResponse:
        """The same answer, handed over a word at a time (the machinery sees a real stream)."""
        response = await self.create(request)
        text = str(response.content[0].get("text", ""))
        for piece in re.findall(r"\S+\s*|\s+", text):
            on_text(piece)
            await asyncio.sleep(0)
        return response

    async def count_tokens(self, request: LLMRequest) -> int | None:
        return None

    async def aclose(self) -> None:
        return None

    @staticmethod
    def _reply(request: LLMRequest) -> str:
        words = _AUTHOR_HEADER.sub("", " ".join(_latest_words(request).split()), count=1)
        if not words:
            return f"{OFFLINE_NOTICE}."
        if len(words) > _QUOTE_CHARS:
            words = words[: _QUOTE_CHARS - 1] + "…"
        return f"{OFFLINE_NOTICE}: “{words}”"

    @staticmethod
    async def _summary(request: LLMRequest) -> str:
        prompt = _wire_text(request.messages[-1]) if request.messages else ""
        transcript = extract_tagged(prompt, "transcript")
        messages: list[ChatMessage] = parse_transcript(transcript if transcript is not None else prompt)
        previous = extract_tagged(prompt, "previous_summary")
        return await extractive_summary_off_loop(
            messages,
            budget_tokens=max(256, request.max_tokens),
            previous_summary=strip_handoff(previous) if previous else None,
        )
