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

import difflib
import functools
import json
import logging
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from agent.images import media_tokens
from agent.settings import ModelSpec
from agent.types import ChatMessage, ContentBlock, ContextState, Usage

_log = logging.getLogger(__name__)

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
# The 5.x tokenizer (Opus/Sonnet/Haiku 5 and later, Fable) counts about 30% more tokens than 4.x
# for the same text: until a session has learned its own scale, its prompt estimate uses this
# one instead of the 4.x-shaped rough estimate.
FIVE_X_SCALE = 1.3
_FIVE_X = re.compile(r"claude-(?:(?:opus|sonnet|haiku)-5|fable-|mythos-)")

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
class LongPromptPrices:
    """Prices (USD/MTok) that apply to a whole request whose prompt is over ``threshold`` tokens."""

    threshold: int
    input_price: float
    output_price: float
    cache_write_5m_price: float
    cache_write_1h_price: float
    cache_read_price: float


@dataclass(frozen=True, slots=True)
class ModelInfo:
    """What we know of a model: window, output cap, minimum cacheable prefix, prices (USD/MTok).

    Cache prices left ``None`` follow the API's usual multipliers of the input price (writes
    1.25x for 5 minutes, 2x for an hour; reads 0.1x). ``known`` is False for a model the table
    does not name (conservative defaults or only a family match); ``fixed_sampling`` marks a
    model that refuses non-default temperature/top_p/top_k and manual extended thinking.
    """

    context_window: int
    max_output: int
    min_cacheable: int
    input_price: float
    output_price: float
    cache_write_5m_price: float | None = None
    cache_write_1h_price: float | None = None
    cache_read_price: float | None = None
    long_prompt: LongPromptPrices | None = None
    fixed_sampling: bool = False
    summarize_thinking: bool = False
    """The model returns its text between tool calls as thinking, empty unless asked to summarize."""
    known: bool = True
    budget_set: bool = False
    budget_tokens: int | None = None
    """A per-model context budget from ``models:`` when ``budget_set`` (None there: the whole window)."""

    def write_price(self, ttl: str) -> float:
        if ttl == "1h":
            return self.cache_write_1h_price or self.input_price * CACHE_WRITE_MULTIPLIER["1h"]
        return self.cache_write_5m_price or self.input_price * CACHE_WRITE_MULTIPLIER["5m"]

    def read_price(self) -> float:
        if self.cache_read_price is not None:
            return self.cache_read_price
        return self.input_price * CACHE_READ_MULTIPLIER

    search_results: bool = True
    """Takes ``search_result`` blocks (cited search hits) in tool results."""
    forced_tool_choice: bool = True
    """Takes ``tool_choice`` ``any``/``tool`` (Fable 5.1 answers a 400: only ``auto``/``none``)."""


_M = 1_000_000
_K128 = 128_000
# Checked against the Claude API docs (model overview pages and the pricing page, 2026-12-01);
# docs/models-and-cost.md lists the sources and the figures we could not confirm there.
# Keys match by substring, longest wins ("claude-opus-5-5" beats "claude-opus-5" beats "opus").
MODELS: dict[str, ModelInfo] = {
    # current lineup
    "claude-opus-5-5": ModelInfo(
        _M, _K128, 512, 4.0, 20.0, 5.0, 8.0, 0.20, fixed_sampling=True, summarize_thinking=True
    ),
    "claude-sonnet-5-5": ModelInfo(
        _M, _K128, 512, 2.0, 10.0, 2.50, 4.0, 0.10, fixed_sampling=True, summarize_thinking=True
    ),
    "claude-haiku-5-5": ModelInfo(
        _M,
        _K128,
        1024,
        0.10,
        0.50,
        0.125,
        0.20,
        0.01,
        long_prompt=LongPromptPrices(100_000, 0.50, 2.50, 0.625, 1.00, 0.05),
        fixed_sampling=True,
    ),
    "claude-fable-5-2": ModelInfo(_M, _K128, 512, 8.0, 40.0, 10.0, 16.0, 0.20, fixed_sampling=True),
    "claude-fable-5-1": ModelInfo(
        _M, _K128, 512, 10.0, 50.0, 12.5, 20.0, 0.25, fixed_sampling=True, forced_tool_choice=False
    ),
    # legacy, still served
    "claude-fable-5": ModelInfo(_M, _K128, 512, 10.0, 50.0, 12.5, 20.0, 1.00, fixed_sampling=True),
    "claude-opus-5": ModelInfo(_M, _K128, 512, 5.0, 25.0, 6.25, 10.0, 0.50, fixed_sampling=True),
    "claude-sonnet-5": ModelInfo(_M, _K128, 1024, 2.0, 10.0, 2.50, 4.0, 0.20, fixed_sampling=True),
    "claude-opus-4-8": ModelInfo(_M, _K128, 1024, 5.0, 25.0, 6.25, 10.0, 0.50),
    "claude-opus-4-7": ModelInfo(_M, _K128, 2048, 5.0, 25.0, 6.25, 10.0, 0.50),
    "claude-opus-4-6": ModelInfo(_M, _K128, 4096, 5.0, 25.0, 6.25, 10.0, 0.50),
    "claude-sonnet-4-6": ModelInfo(_M, _K128, 2048, 3.0, 15.0, 3.75, 6.0, 0.30),
    "claude-opus-4-5": ModelInfo(200_000, 64_000, 4096, 5.0, 25.0),
    "claude-opus-4-1": ModelInfo(200_000, 32_000, 1024, 15.0, 75.0),
    "claude-opus-4": ModelInfo(200_000, 32_000, 1024, 15.0, 75.0),
    "claude-sonnet-4-5": ModelInfo(200_000, 64_000, 1024, 3.0, 15.0),
    "claude-sonnet-4": ModelInfo(200_000, 64_000, 1024, 3.0, 15.0),
    "claude-haiku-4-5": ModelInfo(200_000, 64_000, 4096, 1.0, 5.0),
    "claude-3-7-sonnet": ModelInfo(200_000, 64_000, 1024, 3.0, 15.0),
    "claude-3-5-sonnet": ModelInfo(200_000, 8_192, 1024, 3.0, 15.0),
    "claude-3-5-haiku": ModelInfo(200_000, 8_192, 2048, 0.8, 4.0),
    "claude-3-opus": ModelInfo(200_000, 4_096, 1024, 15.0, 75.0, search_results=False),
    "claude-3-haiku": ModelInfo(200_000, 4_096, 2048, 0.25, 1.25, search_results=False),
    # A family name only (a newer model, a proxy's alias): the family's current prices, but a
    # 200k window until the API says otherwise (prompt-too-long teaches the real limit).
    "opus": ModelInfo(200_000, 64_000, 4096, 4.0, 20.0, known=False),
    "sonnet": ModelInfo(200_000, 64_000, 4096, 2.0, 10.0, known=False),
    "haiku": ModelInfo(200_000, 64_000, 4096, 1.0, 5.0, known=False),
}
# Unknown models: a 200k window, a modest output cap, the largest minimum prefix so we never
# count on a cache hit that cannot happen, Opus-class prices so a cost is never understated, and
# search hits as plain text.
DEFAULT_MODEL_INFO = ModelInfo(200_000, 8_192, 4096, 5.0, 25.0, known=False, search_results=False)

_warned: set[str] = set()


def _longest_match(model: str, keys: Sequence[str]) -> str | None:
    # A key ends where a version number ends: "claude-fable-5-2" is not in "claude-fable-5-20260609".
    name = model.lower()
    matches = [key for key in keys if re.search(re.escape(key.lower()) + r"(?!\d)", name)]
    return max(matches, key=len) if matches else None


@functools.lru_cache(maxsize=256)
def _table_entry(model: str) -> ModelInfo:
    """The table's entry for ``model`` (a turn asks for it several times; the table is fixed)."""
    key = _longest_match(model, list(MODELS))
    return MODELS[key] if key is not None else DEFAULT_MODEL_INFO


def _apply_spec(info: ModelInfo, spec: ModelSpec) -> ModelInfo:
    given = spec.model_fields_set
    changes: dict[str, Any] = {"known": True}
    for name, field_name in (
        ("context_window", "context_window"),
        ("max_output", "max_output"),
        ("min_cache_prefix", "min_cacheable"),
        ("input_price", "input_price"),
        ("output_price", "output_price"),
        ("cache_write_5m_price", "cache_write_5m_price"),
        ("cache_write_1h_price", "cache_write_1h_price"),
        ("cache_read_price", "cache_read_price"),
    ):
        value = getattr(spec, name)
        if name in given and value is not None:
            changes[field_name] = value
    if "budget_tokens" in given:
        changes["budget_set"] = True
        changes["budget_tokens"] = spec.budget_tokens
    if {"input_price", "output_price"} & given:
        changes["long_prompt"] = None  # a deployer's own prices replace the published tiers
    return replace(info, **changes)


def closest_model(model: str, extra: Sequence[str] = ()) -> str | None:
    """The table's full model name (or one of ``extra``) ``model`` most likely misspells, if any is close."""
    bare = re.sub(r"-(\d{8}|latest)$", "", model.strip().lower())
    names = [name for name, info in MODELS.items() if info.known] + [e.lower() for e in extra]
    close = difflib.get_close_matches(bare, names, n=1, cutoff=0.8)
    return close[0] if close and close[0] != bare else None


def model_info(
    model: str,
    *,
    context_window_override: int | None = None,
    prices: dict[str, tuple[float, float]] | None = None,
    overrides: Mapping[str, ModelSpec] | None = None,
) -> ModelInfo:
    """The table entry for ``model`` (substring match, longest key wins), with overrides applied.

    ``overrides`` are the ``models:`` section (keys are model-name substrings, longest wins);
    ``prices`` maps model substrings to (input, output) USD per million tokens (the older
    ``model_prices`` setting). A model neither names is logged once as unknown.
    """
    info = _table_entry(model)
    if overrides:
        spec_key = _longest_match(model, list(overrides))
        if spec_key is not None:
            info = _apply_spec(info, overrides[spec_key])
    if prices:
        price_key = _longest_match(model, list(prices))
        if price_key is not None:
            input_price, output_price = prices[price_key]
            info = replace(info, input_price=input_price, output_price=output_price, long_prompt=None)
    if context_window_override is not None:
        info = replace(info, context_window=context_window_override)
    if not info.known and model not in _warned:
        _warned.add(model)
        guess = closest_model(model, list(overrides or ()))
        _log.warning(
            "model %s is not in the model table%s: assuming a %d-token window, %d output tokens and "
            "$%.2f/$%.2f per MTok until the API or a models: entry says otherwise",
            model,
            f" (did you mean {guess}?)" if guess else "",
            info.context_window,
            info.max_output,
            info.input_price,
            info.output_price,
        )
    return info


def cost_usd(
    model: str,
    usage: Usage,
    *,
    prices: dict[str, tuple[float, float]] | None = None,
    cache_ttl: Literal["5m", "1h"] | str = "5m",
    overrides: Mapping[str, ModelSpec] | None = None,
    info: ModelInfo | None = None,
) -> float:
    """USD cost of one call, each part at its own rate: uncached input, 5-minute and 1-hour
    cache writes, cache reads, output. A usage that does not say how its writes split by TTL
    (``cache_creation_1h_input_tokens`` None) is priced at ``cache_ttl``; a prompt over a model's
    long-prompt threshold is priced at that tier (all of the request, output included)."""
    info = info or model_info(model, prices=prices, overrides=overrides)
    long = info.long_prompt
    if long is not None and usage.context_tokens > long.threshold:
        info = replace(
            info,
            input_price=long.input_price,
            output_price=long.output_price,
            cache_write_5m_price=long.cache_write_5m_price,
            cache_write_1h_price=long.cache_write_1h_price,
            cache_read_price=long.cache_read_price,
        )
    hour = usage.cache_creation_1h_input_tokens
    if hour is None:
        hour = usage.cache_creation_input_tokens if cache_ttl == "1h" else 0
    minutes = max(0, usage.cache_creation_input_tokens - hour)
    dollars = (
        info.input_price * usage.input_tokens
        + info.write_price("5m") * minutes
        + info.write_price("1h") * hour
        + info.read_price() * usage.cache_read_input_tokens
        + info.output_price * usage.output_tokens
    )
    return dollars / 1_000_000


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
    if kind == "search_result":
        inner = block.get("content", [])
        texts = (
            [str(b.get("text", "")) for b in inner if isinstance(b, dict)] if isinstance(inner, list) else []
        )
        return "\n".join([str(block.get("title", "")), str(block.get("source", "")), *texts]), 0
    if kind in ("thinking", "redacted_thinking"):
        # The API drops earlier turns' thinking from the prompt; the current turn's is counted
        # by the real usage of each call, which the estimate grows from.
        return "", 0
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
    """Rough tokens of what every call carries besides the messages (deferred tool definitions
    are not in the prompt until a search loads them)."""
    loaded = [t for t in tools or () if not t.get("defer_loading")]
    if not loaded:
        return _fixed_tokens(system_prompt)
    tools_text = json.dumps(loaded, ensure_ascii=False)
    return _fixed_tokens(system_prompt) + _fixed_tokens(tools_text) + TOOL_PREAMBLE_TOKENS


@functools.lru_cache(maxsize=256)
def _fixed_tokens(text: str) -> int:
    # The same few system prompts and tool sets are estimated on every call of every turn.
    return estimate_text_tokens(text)


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
    scale = state.token_scale or starting_scale(state.token_scale_model or "")
    last, last_rough = state.last_prompt_tokens, state.last_prompt_estimate
    if last is not None and last_rough is not None and rough >= last_rough:
        return last + math.ceil((rough - last_rough) * scale)
    return overhead_tokens(system_prompt, tools) + math.ceil(rough * scale)


def starting_scale(model: str) -> float:
    """The scale a session on ``model`` starts from before the API has reported any usage."""
    return FIVE_X_SCALE if _FIVE_X.search(model.lower()) else 1.0


def bind_model(state: ContextState, model: str, *, learned: Sequence[str] = ()) -> bool:
    """Make ``state``'s calibration ``model``'s: what was learned on another model (its scale,
    its last real prompt size, and the ``learned`` keys of ``state.extra``) is dropped.
    True when something was dropped."""
    if state.token_scale_model == model:
        return False
    if state.token_scale_model is None:
        # Learned before the model was recorded: a session's model is frozen when it starts, so it
        # was this one. Dropping it would skip the next hygiene check of every stored session.
        state.token_scale_model = model
        return False
    had = state.token_scale is not None or state.last_prompt_tokens is not None
    had = had or any(key in state.extra for key in learned)
    if not had:
        return False  # nothing learned yet: the caller records the model when it learns
    state.token_scale_model = model
    state.token_scale = None
    state.last_prompt_tokens = None
    state.last_prompt_estimate = None
    for key in learned:
        state.extra.pop(key, None)
    _log.info("token calibration restarts for model %s (it was learned on another model)", model)
    return True


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
