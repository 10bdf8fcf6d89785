"""The Anthropic provider: ``AsyncAnthropic`` behind :class:`agent.provider.LLMProvider`.

This is the one place where provider errors are classified: every SDK exception, and every
error answer of a plain call (:mod:`agent.llm_call`), becomes one of :mod:`agent.errors` here,
and nothing else in Hygieia parses an error message. Both retry 408, 409, 429, 5xx and
connection errors up to ``max_retries``, as the SDK does, under the limits of
:mod:`agent.llm_call` (no wait past ``llm.max_retry_wait_seconds``, the whole call within
``llm.deadline_seconds``, the body within ``llm.max_response_bytes``); an answer that is not a
well-formed message is :class:`agent.llm_answer.MalformedAnswer`, whatever broke in reading it.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
from collections.abc import Mapping
from typing import Any

import anthropic
import httpx2

from agent.bounded_body import BodyTooLarge, BodyUndecodable, bounding_hook
from agent.cache_diagnostics import read_reason
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
from agent.llm_answer import MalformedAnswer, checked_message, content_of, decode_message, extras_of, usage_of
from agent.llm_call import (
    BadAnswer,
    ErrorAnswer,
    MessagesCall,
    NoAnswer,
    parse_retry_after,
    retry_wait,
    should_retry,
    wait_refusal,
)
from agent.llm_stream import TextSink
from agent.provider import LLMRequest, LLMResponse
from agent.server_context import betas_for
from agent.settings import LLMSettings
from agent.tokens import model_info

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


# What the SDK raises when an answer or a stream's events are not what it expects (missing or
# mistyped fields, an index past the blocks, JSON it cannot parse or nested past the recursion
# limit, events out of order, which it asserts against).
_SDK_READ_FAILURES = (
    ValueError,
    TypeError,
    KeyError,
    IndexError,
    AttributeError,
    RecursionError,
    OverflowError,
    AssertionError,
    # Pydantic warns of a mistyped field; where warnings are errors, that is how it fails.
    UserWarning,
)


def _body_failure(exc: BaseException) -> BaseException | None:
    """The bounded reader's refusal behind an SDK error (it reports one as a connection error)."""
    seen: BaseException | None = exc
    for _ in range(8):
        if seen is None or isinstance(seen, BodyTooLarge | BodyUndecodable):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


def map_error(exc: anthropic.AnthropicError, note: str | None = None) -> LLMError:
    """The :mod:`agent.errors` exception for an SDK exception (the caller raises it ``from exc``);
    ``note`` says why a retry the server asked for was not made."""
    if isinstance(exc, anthropic.APIStatusError) and exc.status_code < 400:
        status = _STREAM_ERROR_STATUS.get(str(exc.type or ""), 500)
        detail = exc.api_message or exc.message
        return _status_error(status, f"Anthropic API stream error {exc.type}: {detail}", {})
    refused = _body_failure(exc)
    if refused is not None:
        return MalformedAnswer(str(refused))
    if isinstance(exc, anthropic.APITimeoutError):
        return ProviderUnreachable("Anthropic API request timed out")
    if isinstance(exc, anthropic.APIConnectionError):
        return ProviderUnreachable(f"cannot reach the Anthropic API: {exc.message}")
    if isinstance(exc, anthropic.APIStatusError):
        detail = (exc.api_message or exc.message)[:500] + (f"; {note}" if note else "")
        kind = f" {exc.type}" if exc.type else ""
        return _status_error(
            exc.status_code, f"Anthropic API {exc.status_code}{kind}: {detail}", exc.response.headers
        )
    if isinstance(exc, anthropic.CredentialsError):
        return AuthenticationFailed(f"Anthropic credentials: {exc}")
    return LLMError(f"Anthropic API: {exc}")


def call_error(failed: ErrorAnswer) -> LLMError:
    """The :mod:`agent.errors` exception for an error answer of :class:`MessagesCall` (worded
    as :func:`map_error` words the SDK's)."""
    kind = f" {failed.error_type}" if failed.error_type else ""
    note = f"; {failed.refused_wait}" if failed.refused_wait else ""
    return _status_error(
        failed.status, f"Anthropic API {failed.status}{kind}: {failed.message}{note}", failed.headers
    )


class AnthropicProvider:
    """:class:`agent.provider.LLMProvider` on the Anthropic Messages API."""

    name = "anthropic"

    def __init__(self, *, api_key: str, base_url: str | None, settings: LLMSettings) -> None:
        self._settings = settings
        # base_url None lets the SDK read ANTHROPIC_BASE_URL (or use its default).
        self._client = anthropic.AsyncAnthropic(
            api_key=api_key,
            base_url=base_url,
            max_retries=settings.max_retries,
            timeout=settings.timeout_seconds,
            # aiohttp's parser is C; the default transport's is Python (~0.5 ms of CPU a call here).
            http_client=anthropic.DefaultAioHttpClient(
                timeout=settings.timeout_seconds,
                event_hooks={"response": [bounding_hook(settings.max_response_bytes)]},
            ),
        )
        # Streams retry here, under the same policy as plain calls (the SDK would wait out any
        # retry-after up to 60 s, and past it retry sooner than asked).
        self._streams = self._client.with_options(max_retries=0)
        # Plain calls skip the SDK's per-call request and response models (llm_call); the SDK's
        # client still says where they go and with which headers, and serves streams and counts.
        self._call = MessagesCall(
            f"{str(self._client.base_url).rstrip('/')}/v1/messages",
            {k: v for k, v in self._client.default_headers.items() if isinstance(v, str)},
            max_retries=settings.max_retries,
            timeout_seconds=settings.timeout_seconds,
            max_retry_wait=settings.max_retry_wait_seconds,
            deadline_seconds=settings.deadline_seconds,
            max_body_bytes=settings.max_response_bytes,
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
        if request.diagnostics is not None:
            # GA, no beta header: the API fingerprints this request under its response id.
            params["diagnostics"] = request.diagnostics
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
                ProviderUnreachable(f"Anthropic API {exc}")
                if exc.timed_out
                else ProviderUnreachable(f"cannot reach the Anthropic API: {exc}")
            )
            raise self._logged(request, error) from exc
        except BadAnswer as exc:
            raise self._logged(request, MalformedAnswer(str(exc))) from exc
        try:
            return self._response(request, decode_message(answer), started)
        except MalformedAnswer as exc:
            self._logged(request, exc)
            raise

    async def stream(self, request: LLMRequest, on_text: TextSink) -> LLMResponse:
        """The same call as :meth:`create`, streamed: ``on_text`` gets each text delta as it arrives.

        Failures before the first text are retried as a plain call's; a stream that breaks after
        it (an ``error`` event, a dropped connection) raises the same errors as a failed call and
        the caller's retry policy applies. The whole of it ends at ``llm.deadline_seconds``.
        """
        started = time.monotonic()
        deadline = self._settings.deadline_seconds
        ends = asyncio.get_running_loop().time() + deadline
        try:
            async with asyncio.timeout_at(ends):
                data, final = await self._stream_retrying(request, on_text, ends)
        except TimeoutError as exc:
            error = ProviderUnreachable(
                f"the Anthropic API gave no complete answer within {deadline:g} s (llm.deadline_seconds)"
            )
            raise self._logged(request, error) from exc
        try:
            return self._response(request, data, started, final)
        except MalformedAnswer as exc:
            self._logged(request, exc)
            raise

    async def _stream_retrying(
        self, request: LLMRequest, on_text: TextSink, ends: float
    ) -> tuple[dict[str, Any], dict[str, Any] | None]:
        loop = asyncio.get_running_loop()
        retries = 0
        while True:
            shown = False

            def sink(text: str) -> None:
                nonlocal shown
                shown = True
                on_text(text)

            try:
                return await self._stream_once(request, sink)
            except anthropic.APIStatusError as exc:
                headers = exc.response.headers
                status = exc.status_code
                if shown or status < 400 or retries >= self._settings.max_retries:
                    raise self._failed(request, exc) from exc
                if not should_retry(status, headers):
                    raise self._failed(request, exc) from exc
                asked = parse_retry_after(headers)
                wait = retry_wait(retries, asked)
                left = ends - loop.time()
                refusal = wait_refusal(
                    asked, wait, max_wait=self._settings.max_retry_wait_seconds, time_left=left
                )
                if refusal is not None:
                    raise self._logged(request, map_error(exc, refusal)) from exc
            except anthropic.APIConnectionError as exc:
                if shown or retries >= self._settings.max_retries or _body_failure(exc) is not None:
                    raise self._failed(request, exc) from exc
                wait = retry_wait(retries, None)
            await asyncio.sleep(wait)
            retries += 1

    async def _stream_once(
        self, request: LLMRequest, on_text: TextSink
    ) -> tuple[dict[str, Any], dict[str, Any] | None]:
        final_usage: Any = None
        betas = self._betas(request)
        messages: Any = self._streams.beta.messages if betas else self._streams.messages
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
        except httpx2.HTTPError as exc:  # the connection dropped mid-stream
            error = ProviderUnreachable(f"the Anthropic API stream broke off: {exc!r}")
            logger.warning("anthropic stream failed: model=%s: %s", request.model, error)
            raise error from exc
        except (BodyTooLarge, BodyUndecodable) as exc:
            raise self._logged(request, MalformedAnswer(f"stream: {exc}")) from exc
        except anthropic.AnthropicError:
            raise
        except _SDK_READ_FAILURES as exc:
            detail = f"stream events the SDK could not read ({type(exc).__name__}: {str(exc)[:200]})"
            raise self._logged(request, MalformedAnswer(detail)) from exc
        if not isinstance(final, dict | None):
            raise self._logged(request, MalformedAnswer("stream: message_delta usage is not an object"))
        try:
            return checked_message(data), final
        except MalformedAnswer as exc:
            self._logged(request, exc)
            raise

    @staticmethod
    def _response(
        request: LLMRequest, message: dict[str, Any], started: float, final: dict[str, Any] | None = None
    ) -> LLMResponse:
        """The response of a Messages API call, as plain data; ``final`` is a stream's last
        ``message_delta`` usage."""
        content = content_of(message)
        usage = usage_of(message["usage"], final)
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
        applied, iterations = extras_of(message)
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
            id=found if isinstance(found := message.get("id"), str) else None,
            cache_miss=read_reason(message.get("diagnostics")),
        )

    async def count_tokens(self, request: LLMRequest) -> int | None:
        """Exact prompt tokens from the count_tokens endpoint; ``None`` where it does not exist."""
        deadline = self._settings.deadline_seconds
        try:
            counter: Any = self._client.beta.messages if self._betas(request) else self._client.messages
            async with asyncio.timeout(deadline):
                counted = await counter.count_tokens(**self._params(request))
            return usage_of({"input_tokens": counted.input_tokens}).input_tokens
        except TimeoutError as exc:
            raise ProviderUnreachable(f"count_tokens gave no answer within {deadline:g} s") from exc
        except (BodyTooLarge, BodyUndecodable) as exc:
            raise MalformedAnswer(f"count_tokens: {exc}") from exc
        except anthropic.NotFoundError:
            # A proxy or compatible server without the endpoint: the caller falls back to estimates.
            logger.info("anthropic count_tokens: endpoint not found (%s)", request.model)
            return None
        except anthropic.AnthropicError as exc:
            raise map_error(exc) from exc
        except _SDK_READ_FAILURES as exc:
            raise MalformedAnswer(f"count_tokens: {type(exc).__name__}") from exc

    async def aclose(self) -> None:
        await self._call.aclose()
        await self._client.close()
