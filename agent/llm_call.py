"""One Messages API call on a kept-alive connection, with the SDK's retry policy.

The SDK's client builds a request model, merges its URL, headers and options and wraps the
response in models of its own on every call: more CPU than the rest of a chat turn. Here the
URL and the headers (authentication, API version, the SDK's identification) are taken from the
SDK's client once, the body is sent as it was serialized, and the answer comes back as bytes.
What the SDK decides per call is kept: the same retries (connection errors, timeouts, 408, 409,
429, 5xx, or what ``x-should-retry`` says), the same waits (``retry-after-ms`` / ``retry-after``,
else 0.5 s doubling up to 8 s with jitter) and its retry-count header.

What a hostile or broken server could make of it is bounded: a wait it asks for past
``llm.max_retry_wait_seconds`` is not taken (the call fails with the answer it had), the whole
call, attempts and waits together, ends at ``llm.deadline_seconds``, and the body is decoded
no further than ``llm.max_response_bytes`` (:mod:`agent.bounded_body`).
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import random
import time
from collections.abc import Mapping
from typing import Any

import aiohttp
import httpx2
from aiohttp.helpers import get_env_proxy_for_url
from yarl import URL

from agent.bounded_body import ACCEPT_ENCODING, BodyTooLarge, BodyUndecodable, read_bounded

INITIAL_RETRY_DELAY = 0.5
MAX_RETRY_DELAY = 8.0
MAX_ERROR_TEXT = 500


class ErrorAnswer(Exception):
    """The API answered with an error status (after any retries): what the caller maps."""

    def __init__(self, status: int, error_type: str | None, message: str, headers: Mapping[str, str]) -> None:
        super().__init__(f"{status} {error_type or ''}: {message}")
        self.status = status
        self.error_type = error_type
        self.message = message
        self.headers = headers
        self.refused_wait: str | None = None
        """Why the retry the server asked for was not made (its wait too long), when it was not."""


class BadAnswer(Exception):
    """The answer's body could not be read: larger than allowed once decoded, or undecodable."""


class NoAnswer(Exception):
    """No answer: the connection failed, broke off or timed out (after any retries)."""

    def __init__(self, message: str, *, timed_out: bool) -> None:
        super().__init__(message)
        self.timed_out = timed_out


def parse_retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds to wait from ``retry-after-ms`` or ``retry-after`` (seconds or an HTTP date)."""
    millis = headers.get("retry-after-ms")
    if millis is not None:
        try:
            return max(0.0, float(millis) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    parsed = email.utils.parsedate_tz(value)
    if parsed is None:
        return None
    return max(0.0, email.utils.mktime_tz(parsed) - time.time())


def should_retry(status: int, headers: Mapping[str, str]) -> bool:
    """Whether an error answer is worth another attempt (the SDK's rule)."""
    told = headers.get("x-should-retry")
    if told in ("true", "false"):
        return told == "true"
    return status in (408, 409, 429) or status >= 500


def retry_wait(retries_taken: int, retry_after: float | None) -> float:
    """Seconds before the next attempt: what the API asked for, else exponential backoff."""
    if retry_after is not None and retry_after > 0:
        return min(retry_after, 4_294_967.0)
    backoff = min(INITIAL_RETRY_DELAY * 2.0 ** min(retries_taken, 1000), MAX_RETRY_DELAY)
    return backoff * (1 - 0.25 * random.random())


def wait_refusal(asked: float | None, wait: float, *, max_wait: float, time_left: float) -> str | None:
    """Why a retry after ``wait`` seconds (``asked`` by the server, when it said) is not made:
    the server asked for more than ``max_wait``, or the wait would outlast the call's deadline."""
    if asked is not None and asked > max_wait:
        return (
            f"the server asked for {asked:,.0f} seconds before a retry, more than the "
            f"{max_wait:g} s this service waits (llm.max_retry_wait_seconds)"
        )
    if wait >= time_left:
        who = (
            f"the server asked for {asked:,.0f} seconds" if asked is not None else f"a retry in {wait:,.1f} s"
        )
        return f"{who} before a retry, past the call's deadline (llm.deadline_seconds)"
    return None


def error_of(status: int, body: bytes, headers: Mapping[str, str]) -> ErrorAnswer:
    """The API's error answer: its ``error.type`` and ``error.message`` when the body is the
    API's JSON, else the body's text (as the SDK's message says it), both cut short."""
    try:
        data: Any = json.loads(body)
    except (ValueError, RecursionError):
        data = None
    error = data.get("error") if isinstance(data, dict) else None
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        kind = error.get("type")
        kind = kind[:100] if isinstance(kind, str) else None
        return ErrorAnswer(status, kind, error["message"][:MAX_ERROR_TEXT], headers)
    text = body[:MAX_ERROR_TEXT].decode("utf-8", "replace")
    return ErrorAnswer(status, None, f"Error code: {status} - {text}", headers)


class MessagesCall:
    """POSTs to one endpoint of the API on a session of its own, opened on first use (in the
    running loop) and closed by :meth:`aclose`."""

    def __init__(
        self,
        url: str,
        headers: Mapping[str, str],
        *,
        max_retries: int,
        timeout_seconds: float,
        max_retry_wait: float = 60.0,
        deadline_seconds: float = 300.0,
        max_body_bytes: int = 16_000_000,
    ) -> None:
        self._url = url
        self._headers = {**headers, "Accept-Encoding": ACCEPT_ENCODING}
        self._max_retries = max(0, max_retries)
        self._max_retry_wait = max_retry_wait
        self._deadline = deadline_seconds
        self._max_body = max_body_bytes
        self._timeout = aiohttp.ClientTimeout(
            total=None, connect=timeout_seconds, sock_connect=timeout_seconds, sock_read=timeout_seconds
        )
        self._session: aiohttp.ClientSession | None = None
        self._proxy: tuple[URL, aiohttp.BasicAuth | None] | None = None

    async def post(self, body: bytes, headers: Mapping[str, str]) -> bytes:
        """The 2xx answer's body; raises :class:`ErrorAnswer` for an error answer,
        :class:`NoAnswer` when none came (in time) and :class:`BadAnswer` for a body past the
        limit. Retries as the SDK would, up to ``max_retries``, within the deadline."""
        ends = asyncio.get_running_loop().time() + self._deadline
        try:
            async with asyncio.timeout_at(ends):
                return await self._retrying(body, headers, ends)
        except TimeoutError as exc:
            raise NoAnswer(
                f"no complete answer within {self._deadline:g} s (llm.deadline_seconds)", timed_out=True
            ) from exc

    async def _retrying(self, body: bytes, headers: Mapping[str, str], ends: float) -> bytes:
        loop = asyncio.get_running_loop()
        retries = 0
        while True:
            try:
                status, answer, got = await self._attempt(body, headers, retries)
            except (aiohttp.ClientError, TimeoutError) as exc:
                if retries >= self._max_retries:
                    timed_out = isinstance(exc, TimeoutError)
                    raise NoAnswer(
                        "request timed out" if timed_out else f"{type(exc).__name__}: {exc}",
                        timed_out=timed_out,
                    ) from exc
                await asyncio.sleep(retry_wait(retries, None))
                retries += 1
                continue
            if status < 300:
                return answer
            if retries >= self._max_retries or not should_retry(status, got):
                raise error_of(status, answer, got)
            asked = parse_retry_after(got)
            wait = retry_wait(retries, asked)
            refusal = wait_refusal(asked, wait, max_wait=self._max_retry_wait, time_left=ends - loop.time())
            if refusal is not None:
                failed = error_of(status, answer, got)
                failed.refused_wait = refusal
                raise failed
            await asyncio.sleep(wait)
            retries += 1

    async def _attempt(
        self, body: bytes, headers: Mapping[str, str], retries: int
    ) -> tuple[int, bytes, Mapping[str, str]]:
        session = self._session
        if session is None or session.closed:
            # As the SDK's transport: its certificate bundle, and a proxy from the environment,
            # looked up once here (aiohttp's trust_env reads the whole environment and ~/.netrc
            # again on every request: an eighth of a turn's CPU).
            connector = aiohttp.TCPConnector(ssl=httpx2.create_ssl_context(trust_env=True))
            session = self._session = aiohttp.ClientSession(
                timeout=self._timeout, connector=connector, auto_decompress=False
            )
            try:
                self._proxy = get_env_proxy_for_url(URL(self._url))
            except LookupError:
                self._proxy = None
        proxy, proxy_auth = self._proxy or (None, None)
        sent = {**self._headers, **headers, "x-stainless-retry-count": str(retries)}
        async with session.post(
            self._url, data=body, headers=sent, proxy=proxy, proxy_auth=proxy_auth
        ) as response:
            try:
                answer = await read_bounded(
                    response.content, response.headers.get("Content-Encoding"), self._max_body
                )
            except (BodyTooLarge, BodyUndecodable) as exc:
                raise BadAnswer(str(exc)) from exc
            return response.status, answer, response.headers

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
