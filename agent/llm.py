"""The Anthropic provider: ``AsyncAnthropic`` behind :class:`agent.provider.LLMProvider`.

This is the one place where provider errors are classified: every SDK exception, and every
error answer of a plain call (:mod:`agent.llm_call`), becomes one of :mod:`agent.errors` here,
and nothing else in Hygieia parses an error message. Both retry 408, 409, 429, 5xx and
connection errors up to ``max_retries``, as the SDK does.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Mapping
from typing import Any

import anthropic
import httpx2

from agent.errors import (
    AuthenticationFailed,
    ContextOverflow,
    InvalidRequest,
    LLMError,
    Overloaded,
    ProviderUnreachable,
    RateLimited,
    SpendLimitReached,
)
from agent.llm_call import ErrorAnswer, MessagesCall, NoAnswer, parse_retry_after
from agent.llm_stream import TextSink
from agent.provider import LLMRequest, LLMResponse
from agent.server_context import betas_for, parse_applied_edits, parse_iterations
from agent.settings import LLMSettings
from agent.tokens import model_info
from agent.types import ContentBlock, Usage

logger = logging.getLogger(__name__)

_TOO_LONG = "prompt is too long"
_EXCEEDS_LIMIT = "exceed context limit"
_EXCEEDS_RE = re.compile(r"([\d,]+)\s*\+\s*([\d,]+)\s*>\s*([\d,]+)")
_ACTUAL_RE = re.compile(r"([\d,]+)\s*tokens\s*>", re.IGNORECASE)
_LIMIT_RE = re.compile(r">\s*([\d,]+)\s*(?:tokens\s*)?maximum", re.IGNORECASE)
# Wording of the API's billing errors ("Your credit balance is too low ...", "You have reached
# your specified API usage limits ...").
_BILLING_WORDS = ("credit balance", "spend limit", "spending limit", "usage limit", "billing")


def parse_prompt_too_long(message: str) -> tuple[int | None, int | None]:
    """The (actual, limit) token numbers of a "prompt is too long: N tokens > M maximum" message."""

    def number(pattern: re.Pattern[str]) -> int | None:
        match = pattern.search(message)
        return int(match.group(1).replace(",", "")) if match else None

    return number(_ACTUAL_RE), number(_LIMIT_RE)


def _status_error(status: int, message: str, headers: Mapping[str, str]) -> LLMError:
    lowered = message.lower()
    if status in (400, 413) and _TOO_LONG in lowered:
        actual, limit = parse_prompt_too_long(message)
        return ContextOverflow(message, actual_tokens=actual, limit_tokens=limit)
    if status == 400 and _EXCEEDS_LIMIT in lowered:
        # "input length and `max_tokens` exceed context limit: 195000 + 8192 > 200000": the
        # input must shrink too, so it is the same overflow (the limit counts the reply).
        match = _EXCEEDS_RE.search(message)
        if match:
            given, reply, limit = (int(g.replace(",", "")) for g in match.groups())
            return ContextOverflow(
                message, actual_tokens=given + reply, limit_tokens=limit, output_tokens=reply
            )
        return ContextOverflow(message)
    if status == 402 or (status in (400, 403) and any(word in lowered for word in _BILLING_WORDS)):
        return SpendLimitReached(message, status_code=status)
    if status == 413:  # the request body itself is too large: shrinking the context is the cure
        return ContextOverflow(message)
    if status == 429:
        return RateLimited(message, retry_after=parse_retry_after(headers))
    if status == 529 or status >= 500:
        return Overloaded(message, status_code=status)
    if status in (401, 403):
        return AuthenticationFailed(message, status_code=status)
    if status == 408:
        return ProviderUnreachable(message, status_code=status)
    if 400 <= status < 500:
        return InvalidRequest(message, status_code=status)
    return LLMError(message, status_code=status)


# An ``error`` event in a stream arrives on a 200 response: its type says what the status would be.
_STREAM_ERROR_STATUS = {
    "overloaded_error": 529,
    "api_error": 500,
    "rate_limit_error": 429,
    "invalid_request_error": 400,
    "authentication_error": 401,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
}


def map_error(exc: anthropic.AnthropicError) -> LLMError:
    """The :mod:`agent.errors` exception for an SDK exception (the caller raises it ``from exc``)."""
    if isinstance(exc, anthropic.APIStatusError) and exc.status_code < 400:
        status = _STREAM_ERROR_STATUS.get(str(exc.type or ""), 500)
        detail = exc.api_message or exc.message
        return _status_error(status, f"Anthropic API stream error {exc.type}: {detail}", {})
    if isinstance(exc, anthropic.APITimeoutError):
        return ProviderUnreachable("Anthropic API request timed out")
    if isinstance(exc, anthropic.APIConnectionError):
        return ProviderUnreachable(f"cannot reach the Anthropic API: {exc.message}")
    if isinstance(exc, anthropic.APIStatusError):
        detail = exc.api_message or exc.message
        kind = f" {exc.type}" if exc.type else ""
        return _status_error(
            exc.status_code, f"Anthropic API {exc.status_code}{kind}: {detail}", exc.response.headers
        )
    if isinstance(exc, anthropic.CredentialsError):
        return AuthenticationFailed(f"Anthropic credentials: {exc}")
    return LLMError(f"Anthropic API: {exc}")


def _usage(raw: Mapping[str, Any], final: Mapping[str, Any] | None = None) -> Usage:
    """Our :class:`Usage` from a response's ``usage``; ``final`` (a stream's last
    ``message_delta`` usage) wins for every figure it carries, the TTL split of the cache
    writes included."""

    def figure(name: str) -> Any:
        value = final.get(name) if final is not None else None
        return value if value is not None else raw.get(name)

    split = figure("cache_creation")
    hour = split.get("ephemeral_1h_input_tokens") if isinstance(split, dict) else None
    return Usage(
        input_tokens=int(figure("input_tokens") or 0),
        output_tokens=int(figure("output_tokens") or 0),
        cache_creation_input_tokens=int(figure("cache_creation_input_tokens") or 0),
        cache_read_input_tokens=int(figure("cache_read_input_tokens") or 0),
        cache_creation_1h_input_tokens=None if hour is None else int(hour),
    )


def _without_nulls(value: Any) -> Any:
    """``value`` without the keys whose value is null, at every depth (as the SDK's
    ``to_dict(exclude_none=True)`` gives a block: what is stored is the same either way)."""
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value]
    return value


def message_json(body: bytes) -> dict[str, Any]:
    """The Messages API's answer as plain data, checked for the fields a reply needs."""
    try:
        data = json.loads(body)
    except ValueError as exc:
        raise LLMError("Anthropic API: the answer is not JSON") from exc
    if not isinstance(data, dict) or not isinstance(data.get("content"), list):
        raise LLMError("Anthropic API: the answer is not a message (no content list)")
    if not isinstance(data.get("usage"), dict):
        raise LLMError("Anthropic API: the answer is not a message (no usage)")
    return data


def call_error(failed: ErrorAnswer) -> LLMError:
    """The :mod:`agent.errors` exception for an error answer of :class:`MessagesCall` (worded
    as :func:`map_error` words the SDK's)."""
    kind = f" {failed.error_type}" if failed.error_type else ""
    return _status_error(
        failed.status, f"Anthropic API {failed.status}{kind}: {failed.message}", failed.headers
    )


class AnthropicProvider:
    """:class:`agent.provider.LLMProvider` on the Anthropic Messages API."""

    name = "anthropic"

    def __init__(self, *, api_key: str, base_url: str | None, settings: LLMSettings) -> None:
        # base_url None lets the SDK read ANTHROPIC_BASE_URL (or use its default).
        self._client = anthropic.AsyncAnthropic(
            api_key=api_key,
            base_url=base_url,
            max_retries=settings.max_retries,
            timeout=settings.timeout_seconds,
            # aiohttp's parser is C; the default transport's is Python (~0.5 ms of CPU a call here).
            http_client=anthropic.DefaultAioHttpClient(timeout=settings.timeout_seconds),
        )
        # Plain calls skip the SDK's per-call request and response models (llm_call); the SDK's
        # client still says where they go and with which headers, and serves streams and counts.
        self._call = MessagesCall(
            f"{str(self._client.base_url).rstrip('/')}/v1/messages",
            {k: v for k, v in self._client.default_headers.items() if isinstance(v, str)},
            max_retries=settings.max_retries,
            timeout_seconds=settings.timeout_seconds,
        )

    @staticmethod
    def _params(request: LLMRequest, betas: tuple[str, ...] | None = None) -> dict[str, Any]:
        """The SDK's parameters; ``betas``: :meth:`_betas` when the caller has them already
        (they scan every message)."""
        params: dict[str, Any] = {"model": request.model, "messages": request.messages}
        if request.system:
            params["system"] = request.system
        if request.tools:
            params["tools"] = request.tools
        betas = AnthropicProvider._betas(request) if betas is None else betas
        if betas:
            params["betas"] = list(betas)
        if request.context_management is not None:
            params["context_management"] = request.context_management
        return params

    @staticmethod
    def _betas(request: LLMRequest) -> tuple[str, ...]:
        return betas_for(request.messages, request.betas)

    @staticmethod
    def _call_params(request: LLMRequest, betas: tuple[str, ...] | None = None) -> dict[str, Any]:
        params = AnthropicProvider._params(request, betas)
        params["max_tokens"] = request.max_tokens
        if request.compaction is not None:
            params["compaction"] = request.compaction
        extra: dict[str, Any] = {}
        if request.cache_control is not None:
            # Automatic caching: one top-level marker, the API places (and moves) the breakpoint.
            extra["cache_control"] = request.cache_control
        if request.thinking is not None:
            extra["thinking"] = request.thinking
        if request.fallbacks is not None:
            extra["fallbacks"] = request.fallbacks
        if extra:
            params["extra_body"] = extra
        if request.temperature is not None and model_info(request.model).fixed_sampling:
            # The 5.x models refuse any non-default sampling with a 400: leave it out.
            logger.debug("temperature left out: %s takes only its default sampling", request.model)
        elif request.temperature is not None:
            # SDK 2.x dropped the temperature argument; the API still reads it from the body.
            params["extra_body"] = {**params.get("extra_body", {}), "temperature": request.temperature}
        return params

    @staticmethod
    def _failed(request: LLMRequest, exc: anthropic.AnthropicError) -> LLMError:
        return AnthropicProvider._logged(request, map_error(exc))

    @staticmethod
    def _logged(request: LLMRequest, error: LLMError) -> LLMError:
        logger.warning(
            "anthropic call failed: model=%s purpose=%s error=%s: %s",
            request.model,
            request.purpose,
            type(error).__name__,
            error,
        )
        return error

    @staticmethod
    def _body(request: LLMRequest, betas: tuple[str, ...]) -> bytes:
        """The request body as the API takes it: the SDK's parameters, extra body merged in."""
        params = AnthropicProvider._call_params(request, betas)
        params.pop("betas", None)
        extra = params.pop("extra_body", {})
        return json.dumps({**params, **extra}, ensure_ascii=False).encode()

    async def create(self, request: LLMRequest) -> LLMResponse:
        """One call, with the SDK's retries, timeouts and error classes, its body serialized
        here and its answer read as plain data (:mod:`agent.llm_call`): the SDK's own request
        and response models cost more CPU than the rest of a turn (docs/measured.md)."""
        started = time.monotonic()
        betas = self._betas(request)
        # Beta features (context editing, compaction): the same endpoint, with their header.
        headers = {"anthropic-beta": ",".join(betas)} if betas else {}
        try:
            answer = await self._call.post(self._body(request, betas), headers)
        except ErrorAnswer as exc:
            raise self._logged(request, call_error(exc)) from exc
        except NoAnswer as exc:
            error = (
                ProviderUnreachable("Anthropic API request timed out")
                if exc.timed_out
                else ProviderUnreachable(f"cannot reach the Anthropic API: {exc}")
            )
            raise self._logged(request, error) from exc
        return self._response(request, message_json(answer), started)

    async def stream(self, request: LLMRequest, on_text: TextSink) -> LLMResponse:
        """The same call as :meth:`create`, streamed: ``on_text`` gets each text delta as it arrives.

        A stream that breaks midway (an ``error`` event, a dropped connection) raises the same
        errors as a failed call; the SDK does not retry it, the caller's retry policy applies.
        """
        started = time.monotonic()
        final_usage: Any = None
        betas = self._betas(request)
        messages: Any = self._client.beta.messages if betas else self._client.messages
        try:
            async with messages.stream(**self._call_params(request, betas)) as events:
                async for event in events:
                    if event.type == "content_block_delta" and event.delta.type == "text_delta":
                        on_text(event.delta.text)
                    elif event.type == "message_delta":
                        # The final, cumulative usage: message_start's figures are provisional.
                        final_usage = event.usage
                message = await events.get_final_message()
                data = message.to_dict(mode="json", exclude_none=True)
                final = None if final_usage is None else final_usage.to_dict(mode="json", exclude_none=True)
        except anthropic.AnthropicError as exc:
            raise self._failed(request, exc) from exc
        except httpx2.HTTPError as exc:  # the connection dropped mid-stream
            error = ProviderUnreachable(f"the Anthropic API stream broke off: {exc!r}")
            logger.warning("anthropic stream failed: model=%s: %s", request.model, error)
            raise error from exc
        return self._response(request, data, started, final)

    @staticmethod
    def _response(
        request: LLMRequest, message: dict[str, Any], started: float, final: dict[str, Any] | None = None
    ) -> LLMResponse:
        """The response of a Messages API call, as plain data; ``final`` is a stream's last
        ``message_delta`` usage."""
        content: list[ContentBlock] = [_without_nulls(block) for block in message["content"]]
        raw = message["usage"]
        usage = _usage(raw, final)
        model = str(message.get("model") or request.model)
        stop = message.get("stop_reason")
        logger.info(
            "anthropic call: model=%s purpose=%s stop=%s in=%d cache_w=%d cache_r=%d out=%d ms=%d",
            model,
            request.purpose,
            stop,
            usage.input_tokens,
            usage.cache_creation_input_tokens,
            usage.cache_read_input_tokens,
            usage.output_tokens,
            int((time.monotonic() - started) * 1000),
        )
        applied = parse_applied_edits(message.get("context_management"))
        iterations = parse_iterations(raw.get("iterations"))
        if applied:
            logger.info(
                "anthropic context edits: %s",
                ", ".join(f"{e.type} cleared {e.cleared_input_tokens} tokens" for e in applied),
            )
        return LLMResponse(
            content=content,
            stop_reason=str(stop or "end_turn"),
            usage=usage,
            model=model,
            applied_edits=applied,
            iterations=iterations,
            stop_details=details if isinstance(details := message.get("stop_details"), dict) else None,
        )

    async def count_tokens(self, request: LLMRequest) -> int | None:
        """Exact prompt tokens from the count_tokens endpoint; ``None`` where it does not exist."""
        try:
            counter: Any = self._client.beta.messages if self._betas(request) else self._client.messages
            counted = await counter.count_tokens(**self._params(request))
        except anthropic.NotFoundError:
            # A proxy or compatible server without the endpoint: the caller falls back to estimates.
            logger.info("anthropic count_tokens: endpoint not found (%s)", request.model)
            return None
        except anthropic.AnthropicError as exc:
            raise map_error(exc) from exc
        return int(counted.input_tokens)

    async def aclose(self) -> None:
        await self._call.aclose()
        await self._client.close()
