"""Token estimation (rough, and calibrated from real API usage), the model table and cost.

The rough estimate is ~4 characters per token for Latin text, one token per CJK, Hangul
or kana character, a fixed ~1600 tokens per image, and tool blocks counted by their JSON.
Once the API has reported a real prompt size, :func:`calibrate` learns this session's
characters-per-token ratio and the calibrated estimate is used instead.
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
# An image counted in "characters" so that calibrated and rough estimates agree on it.
IMAGE_CHARS = int(IMAGE_TOKENS * CHARS_PER_TOKEN)
MESSAGE_OVERHEAD_TOKENS = 4
MESSAGE_OVERHEAD_CHARS = int(MESSAGE_OVERHEAD_TOKENS * CHARS_PER_TOKEN)
MIN_CHARS_PER_TOKEN = 1.0
MAX_CHARS_PER_TOKEN = 8.0
# Weight of a new observation in the smoothed ratio: steady, yet settles within a few calls.
CALIBRATION_ALPHA = 0.3

CACHE_WRITE_MULTIPLIER = {"5m": 1.25, "1h": 2.0}
CACHE_READ_MULTIPLIER = 0.1

# One token per character: CJK ideographs (incl. extension A and compatibility), kana,
# Hangul syllables and jamo, CJK punctuation and fullwidth forms, supplementary ideographs.
_WIDE = re.compile(
    "[\u1100-\u11ff\u3000-\u303f\u3040-\u309f\u30a0-\u30ff\u3130-\u318f\u3400-\u4dbf"
    "\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef\U00020000-\U0002ffff]"
)


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
        wide = len(_WIDE.findall(text))
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


def estimate_message_tokens(m: ChatMessage) -> int:
    """Rough tokens of one message, including a small per-message framing overhead."""
    total = MESSAGE_OVERHEAD_TOKENS
    for block in m.content:
        text, images = _block_parts(block)
        total += estimate_text_tokens(text) + images
    return total


def message_chars(m: ChatMessage) -> int:
    """The characters of one message as :func:`calibrate` counts them (images at a fixed weight)."""
    total = MESSAGE_OVERHEAD_CHARS
    for block in m.content:
        text, images = _block_parts(block)
        total += len(text) + int(images * CHARS_PER_TOKEN)
    return total


def messages_chars(ms: Sequence[ChatMessage]) -> int:
    """Total characters of ``ms`` in the unit :func:`calibrate` learns against."""
    return sum(message_chars(m) for m in ms)


def prompt_chars(system: str, ms: Sequence[ChatMessage]) -> int:
    """Characters of a whole prompt (system + messages): what callers pass to :func:`calibrate`."""
    return len(system) + messages_chars(ms)


def estimate_messages_tokens(ms: Sequence[ChatMessage], *, chars_per_token: float | None = None) -> int:
    """Tokens of ``ms``: calibrated (chars / learned ratio) when a ratio is given, else rough."""
    if chars_per_token:
        return math.ceil(messages_chars(ms) / chars_per_token)
    return sum(estimate_message_tokens(m) for m in ms)


def estimate_tokens(text_or_messages: str | Sequence[ChatMessage], state: ContextState | None = None) -> int:
    """Calibrated estimate when ``state`` has learned a ratio, else the rough one."""
    ratio = state.chars_per_token if state is not None else None
    if isinstance(text_or_messages, str):
        if ratio:
            return math.ceil(len(text_or_messages) / ratio)
        return estimate_text_tokens(text_or_messages)
    return estimate_messages_tokens(text_or_messages, chars_per_token=ratio)


def estimate_prompt_tokens(
    system_prompt: str,
    messages: Sequence[ChatMessage],
    state: ContextState,
    *,
    tools: Sequence[dict[str, Any]] | None = None,
) -> int:
    """The best guess of a prompt's size: the last REAL count plus the growth since (calibrated),
    else a calibrated estimate of the whole, else a rough one (tools included)."""
    chars = prompt_chars(system_prompt, messages)
    ratio = state.chars_per_token
    last, last_chars = state.last_prompt_tokens, state.last_prompt_chars
    if last is not None and last_chars is not None and chars >= last_chars:
        return last + math.ceil((chars - last_chars) / (ratio or CHARS_PER_TOKEN))
    if ratio:
        # The learned ratio already absorbs the tool definitions (real counts include them).
        return math.ceil(chars / ratio)
    tools_text = json.dumps(list(tools), ensure_ascii=False) if tools else ""
    return (
        estimate_text_tokens(system_prompt)
        + estimate_messages_tokens(messages)
        + estimate_text_tokens(tools_text)
    )


def calibrate(state: ContextState, prompt_chars: int, real_tokens: int) -> None:
    """Learn characters-per-token from one real API-reported prompt size (smoothed, clamped 1..8)."""
    if prompt_chars <= 0 or real_tokens <= 0:
        return
    observed = min(MAX_CHARS_PER_TOKEN, max(MIN_CHARS_PER_TOKEN, prompt_chars / real_tokens))
    previous = state.chars_per_token
    ratio = observed if previous is None else previous + CALIBRATION_ALPHA * (observed - previous)
    state.chars_per_token = min(MAX_CHARS_PER_TOKEN, max(MIN_CHARS_PER_TOKEN, ratio))
