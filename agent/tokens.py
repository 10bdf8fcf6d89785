"""Token estimation (rough, and calibrated from real API usage), the model table and cost.

The rough estimate is ~4 characters per token for Latin text, one token per CJK, Hangul
or kana character, a fixed ~1600 tokens per image, and tool blocks counted by their JSON.

A prompt is its messages plus a fixed overhead the API adds to every call: the system
prompt, the tool definitions and, when tools are offered, the API's own tool-use preamble.
Once the API has reported a real prompt size, :func:`calibrate` learns this session's scale
(real message tokens / rough message tokens) with the overhead taken out, and only once the
messages outweigh the overhead: a learned ratio that absorbed the overhead would multiply a
later pasted document several times over and compact at a fraction of the real size.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from agent.images import media_tokens
from agent.types import ChatMessage, ContentBlock, ContextState, Usage

CHARS_PER_TOKEN = 4.0
IMAGE_TOKENS = 1600
MESSAGE_OVERHEAD_TOKENS = 4
# The tool-use system prompt the API adds to a request with tools (Claude 4 models, tool_choice
# auto: 346 tokens; "any"/"tool": 313), counted in the prompt like any other input.
TOOL_PREAMBLE_TOKENS = 346
MIN_SCALE = 0.25
MAX_SCALE = 4.0
# Weight of a new observation in the smoothed scale: steady, yet settles within a few calls.
CALIBRATION_ALPHA = 0.3

CACHE_WRITE_MULTIPLIER = {"5m": 1.25, "1h": 2.0}
CACHE_READ_MULTIPLIER = 0.1

# One token per character: CJK ideographs (incl. extension A and compatibility), kana,
# Hangul syllables and jamo, CJK punctuation and fullwidth forms, supplementary ideographs.
_WIDE = re.compile(
    "[\u1100-\u11ff\u3000-\u303f\u3040-\u309f\u30a0-\u30ff\u3130-\u318f\u3400-\u4dbf"
    "\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef\U00020000-\U0002ffff]"
)

_ASCII_BYTES = bytes(range(128))


@dataclass(frozen=True, slots=True)
class ModelInfo:
    """What we know of a model: window, output cap, minimum cacheable prefix, prices (USD/MTok)."""

    context_window: int
    max_output: int
    min_cacheable: int
    input_price: float
    output_price: float


# Keys match by substring, longest wins ("claude-opus-4-5" beats "claude-opus-4" beats "opus").
# Sonnet 4.x offers a 1M-token window in beta; the default stays 200k unless overridden.
# Prices of models newer than this table are not guessed: set them with `model_prices`.
MODELS: dict[str, ModelInfo] = {
    "claude-opus-4-8": ModelInfo(200_000, 64_000, 4096, 5.0, 25.0),
    "claude-opus-4-7": ModelInfo(200_000, 64_000, 4096, 5.0, 25.0),
    "claude-opus-4-6": ModelInfo(200_000, 64_000, 4096, 5.0, 25.0),
    "claude-opus-4-5": ModelInfo(200_000, 64_000, 4096, 5.0, 25.0),
    "claude-opus-4-1": ModelInfo(200_000, 32_000, 1024, 15.0, 75.0),
    "claude-opus-4": ModelInfo(200_000, 32_000, 1024, 15.0, 75.0),
    "claude-sonnet-4-6": ModelInfo(200_000, 64_000, 1024, 3.0, 15.0),
    "claude-sonnet-4-5": ModelInfo(200_000, 64_000, 1024, 3.0, 15.0),
    "claude-sonnet-4": ModelInfo(200_000, 64_000, 1024, 3.0, 15.0),
    "claude-haiku-4-5": ModelInfo(200_000, 64_000, 4096, 1.0, 5.0),
    "claude-3-7-sonnet": ModelInfo(200_000, 64_000, 1024, 3.0, 15.0),
    "claude-3-5-sonnet": ModelInfo(200_000, 8_192, 1024, 3.0, 15.0),
    "claude-3-5-haiku": ModelInfo(200_000, 8_192, 2048, 0.8, 4.0),
    "claude-3-opus": ModelInfo(200_000, 4_096, 1024, 15.0, 75.0),
    "claude-3-haiku": ModelInfo(200_000, 4_096, 2048, 0.25, 1.25),
    "opus": ModelInfo(200_000, 32_000, 4096, 15.0, 75.0),
    "sonnet": ModelInfo(200_000, 64_000, 1024, 3.0, 15.0),
    "haiku": ModelInfo(200_000, 8_192, 4096, 1.0, 5.0),
}
# Unknown models: a 200k window, a modest output cap, and the largest minimum prefix so we
# never count on a cache hit that cannot happen; Sonnet-class prices.
DEFAULT_MODEL_INFO = ModelInfo(200_000, 4_096, 4096, 3.0, 15.0)


def _longest_match(model: str, keys: Sequence[str]) -> str | None:
    name = model.lower()
    matches = [key for key in keys if key.lower() in name]
    return max(matches, key=len) if matches else None


def model_info(
    model: str,
    *,
    context_window_override: int | None = None,
    prices: dict[str, tuple[float, float]] | None = None,
) -> ModelInfo:
    """The table entry for ``model`` (substring match, longest key wins), with overrides applied.

    ``prices`` maps model substrings to (input, output) USD per million tokens.
    """
    key = _longest_match(model, list(MODELS))
    info = MODELS[key] if key is not None else DEFAULT_MODEL_INFO
    if prices:
        price_key = _longest_match(model, list(prices))
        if price_key is not None:
            input_price, output_price = prices[price_key]
            info = replace(info, input_price=input_price, output_price=output_price)
    if context_window_override is not None:
        info = replace(info, context_window=context_window_override)
    return info


def cost_usd(
    model: str,
    usage: Usage,
    *,
    prices: dict[str, tuple[float, float]] | None = None,
    cache_ttl: Literal["5m", "1h"] | str = "5m",
) -> float:
    """USD cost of one call: cache writes at 1.25x (5m) or 2x (1h) the input price, reads at 0.1x."""
    info = model_info(model, prices=prices)
    write = CACHE_WRITE_MULTIPLIER.get(cache_ttl, CACHE_WRITE_MULTIPLIER["5m"])
    input_cost = info.input_price * (
        usage.input_tokens
        + usage.cache_creation_input_tokens * write
        + usage.cache_read_input_tokens * CACHE_READ_MULTIPLIER
    )
    return (input_cost + info.output_price * usage.output_tokens) / 1_000_000


def estimate_text_tokens(text: str) -> int:
    """Rough tokens of ``text``: wide (CJK/Hangul/kana) characters count one each, the rest chars/4."""
    if not text:
        return 0
    narrow, wide = len(text), 0
    if not text.isascii():
        # Wide characters are never ASCII: look for them among the others only (an accent or an
        # ellipsis in English text would otherwise cost a regex pass over all of it).
        others = text.encode("utf-8", "surrogatepass").translate(None, _ASCII_BYTES)
        wide = len(_WIDE.findall(others.decode("utf-8", "surrogatepass")))
        narrow -= wide
    return wide + math.ceil(narrow / CHARS_PER_TOKEN)


def _block_parts(block: ContentBlock) -> tuple[str, int]:
    """(countable text, tokens of its images and documents) of one content block."""
    kind = block.get("type")
    if kind == "text":
        return str(block.get("text", "")), 0
    if kind in ("image", "document"):
        return "", media_tokens(block)  # the API's own per-image formula, pages for a PDF
    if kind == "tool_result":
        inner = block.get("content", "")
        if isinstance(inner, list):
            parts = [_block_parts(b) for b in inner if isinstance(b, dict)]
            return "\n".join(text for text, _ in parts), sum(images for _, images in parts)
        return str(inner), 0
    if kind in ("thinking", "redacted_thinking"):
        return str(block.get("thinking", block.get("data", ""))), 0
    # tool_use and anything unknown: as the JSON the API will see.
    return json.dumps(block, ensure_ascii=False, default=str), 0


def content_tokens(content: Sequence[ContentBlock]) -> int:
    """Rough tokens of a message with this content, including a small per-message framing overhead."""
    total = MESSAGE_OVERHEAD_TOKENS
    for block in content:
        text, images = _block_parts(block)
        total += estimate_text_tokens(text) + images
    return total


def estimate_message_tokens(m: ChatMessage) -> int:
    """Rough tokens of one message: the figure stored with it (the store keeps
    :func:`content_tokens` of every row, so that no turn estimates its history again), else
    computed from its content."""
    if m.token_estimate is not None:
        return m.token_estimate
    return content_tokens(m.content)


def estimate_messages_tokens(ms: Sequence[ChatMessage], *, scale: float | None = None) -> int:
    """Tokens of ``ms``: rough, times the session's learned ``scale`` when there is one."""
    rough = sum(estimate_message_tokens(m) for m in ms)
    return math.ceil(rough * scale) if scale else rough


def estimate_tokens(text_or_messages: str | Sequence[ChatMessage], state: ContextState | None = None) -> int:
    """Calibrated estimate when ``state`` has learned a scale, else the rough one."""
    scale = state.token_scale if state is not None else None
    if isinstance(text_or_messages, str):
        rough = estimate_text_tokens(text_or_messages)
        return math.ceil(rough * scale) if scale else rough
    return estimate_messages_tokens(text_or_messages, scale=scale)


@dataclass(frozen=True, slots=True)
class PromptSize:
    """A prompt's rough (uncalibrated) tokens: its messages, and the fixed part the API adds to
    every call (system prompt, tool definitions, the tool-use preamble)."""

    messages: int
    overhead: int


def overhead_tokens(system_prompt: str, tools: Sequence[dict[str, Any]] | None = None) -> int:
    """Rough tokens of what every call carries besides the messages."""
    if not tools:
        return estimate_text_tokens(system_prompt)
    tools_text = json.dumps(list(tools), ensure_ascii=False)
    return estimate_text_tokens(system_prompt) + estimate_text_tokens(tools_text) + TOOL_PREAMBLE_TOKENS


def prompt_size(
    system_prompt: str, messages: Sequence[ChatMessage], tools: Sequence[dict[str, Any]] | None = None
) -> PromptSize:
    """The rough size of a prompt, split as :func:`calibrate` learns from it."""
    return PromptSize(estimate_messages_tokens(messages), overhead_tokens(system_prompt, tools))


def estimate_prompt_tokens(
    system_prompt: str,
    messages: Sequence[ChatMessage],
    state: ContextState,
    *,
    tools: Sequence[dict[str, Any]] | None = None,
) -> int:
    """The best guess of a prompt's size: the last REAL count plus the (calibrated) growth of the
    messages since, else the overhead plus a calibrated estimate of the messages."""
    return prompt_tokens_from_rough(system_prompt, estimate_messages_tokens(messages), state, tools=tools)


def prompt_tokens_from_rough(
    system_prompt: str,
    rough: int,
    state: ContextState,
    *,
    tools: Sequence[dict[str, Any]] | None = None,
) -> int:
    """:func:`estimate_prompt_tokens` for messages whose rough estimate is already known."""
    scale = state.token_scale or 1.0
    last, last_rough = state.last_prompt_tokens, state.last_prompt_estimate
    if last is not None and last_rough is not None and rough >= last_rough:
        return last + math.ceil((rough - last_rough) * scale)
    return overhead_tokens(system_prompt, tools) + math.ceil(rough * scale)


def calibrate(state: ContextState, size: PromptSize, real_tokens: int) -> None:
    """Learn real/rough for messages from one real prompt size, the fixed overhead taken out.

    Not while the overhead outweighs the messages: the rough overhead's own error would then
    be most of what is learned. Smoothed, clamped to [MIN_SCALE, MAX_SCALE].
    """
    if size.messages <= 0 or real_tokens <= 0 or size.messages < size.overhead:
        return
    observed = (real_tokens - size.overhead) / size.messages
    observed = min(MAX_SCALE, max(MIN_SCALE, observed))
    previous = state.token_scale
    scale = observed if previous is None else previous + CALIBRATION_ALPHA * (observed - previous)
    state.token_scale = min(MAX_SCALE, max(MIN_SCALE, scale))
