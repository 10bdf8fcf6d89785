"""The endpoints: ``GET /v1/models``, ``POST /v1/chat/completions``, ``POST /v1/responses``.

Each reads and checks the whole request first (key, body, model, conversation, the new text),
so that a bad request is answered 4xx with nothing stored; then the new text goes to the gateway
(committed to the inbox) and the request waits for the answer. A streamed answer begins only
with its first words: a failure before them is still a plain HTTP error.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.types import Receive, Scope, Send

from agent.clock import utcnow
from gateway.platforms.http_api.app import authenticate, check_model, read_body
from gateway.platforms.http_api.errors import ApiError, context_length_exceeded, timed_out
from gateway.platforms.http_api.exchange import Delta, Event, Exchange, Failed, Finished
from gateway.platforms.http_api.sse import (
    DONE,
    chat_chunk,
    chat_completion,
    error_event,
    event,
    response_body,
)
from gateway.platforms.http_api.wire import (
    conversation_name,
    load_json,
    new_text,
    parse_chat,
    parse_responses,
)

if TYPE_CHECKING:
    from gateway.platforms.http_api.adapter import ApiAdapter

CONVERSATION_HEADER = "x-hygieia-conversation"
DEFAULT_CONVERSATION = "default"


def models() -> Response:
    from gateway.platforms.http_api.adapter import MODEL_NAME

    return JSONResponse(
        {
            "object": "list",
            "data": [{"id": MODEL_NAME, "object": "model", "created": 0, "owned_by": "hygieia"}],
        }
    )


def _check_length(adapter: ApiAdapter, text: str) -> None:
    if len(text) > adapter.max_chars:
        raise context_length_exceeded(
            f"The new message has {len(text):,} characters; at most {adapter.max_chars:,} are accepted "
            "in one request (sessions.max_inbound_chars)."
        )


async def _next(exchange: Exchange, deadline: float, limit: float) -> Event:
    try:
        return await asyncio.wait_for(exchange.events.get(), max(0.0, deadline - time.monotonic()))
    except TimeoutError:
        exchange.closed = True
        return Failed(timed_out(limit))


async def _final(exchange: Exchange, deadline: float, limit: float) -> Finished:
    while True:
        got = await _next(exchange, deadline, limit)
        if isinstance(got, Failed):
            raise got.error
        if isinstance(got, Finished):
            return got


class _Streamed(StreamingResponse):
    """Server-sent events; the conversation's turn is released when the response ends, however it ends
    (a client that goes away included)."""

    def __init__(self, body: AsyncIterator[bytes], stack: AsyncExitStack) -> None:
        super().__init__(
            body,
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )
        self._stack = stack

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            await self._stack.aclose()


Render = Callable[[Event], bytes]


async def _stream(
    adapter: ApiAdapter,
    key_name: str,
    conversation: str,
    text: str,
    opening: bytes,
    render: Render,
    closing: Callable[[Finished], Awaitable[bytes]],
) -> Response:
    """Ask, wait for the first event, then stream (or answer the error plainly)."""
    stack = AsyncExitStack()
    try:
        exchange = await stack.enter_async_context(adapter.ask(key_name, conversation, text, stream=True))
        deadline = time.monotonic() + adapter.reply_timeout
        first = await _next(exchange, deadline, adapter.reply_timeout)
    except BaseException:
        await stack.aclose()
        raise
    if isinstance(first, Failed):
        await stack.aclose()
        raise first.error

    async def body() -> AsyncIterator[bytes]:
        yield opening
        got: Event = first
        while True:
            if isinstance(got, Failed):
                yield error_event(got.error)
                break
            if isinstance(got, Finished):
                yield await closing(got)
                break
            yield render(got)
            got = await _next(exchange, deadline, adapter.reply_timeout)
        yield DONE

    return _Streamed(body(), stack)


def _chat_conversation(request: Request, user: str | None) -> str:
    header = request.headers.get(CONVERSATION_HEADER)
    if header is not None:
        return conversation_name(header, "X-Hygieia-Conversation")
    if user:
        return conversation_name(user, "user")
    return DEFAULT_CONVERSATION


async def chat_completions(adapter: ApiAdapter, request: Request) -> Response:
    key_name = authenticate(adapter, request)
    chat = parse_chat(load_json(await read_body(request)))
    check_model(chat["model"])
    conversation = _chat_conversation(request, chat["user"])
    text = new_text(chat["messages"], "messages")
    _check_length(adapter, text)
    answer_id = f"chatcmpl-{uuid.uuid4().hex}"
    model = chat["model"]
    if not chat["stream"]:
        async with adapter.ask(key_name, conversation, text, stream=False) as exchange:
            done = await _final(exchange, time.monotonic() + adapter.reply_timeout, adapter.reply_timeout)
        return JSONResponse(chat_completion(answer_id, model, done.text, done.reason))

    def render(got: Event) -> bytes:
        assert isinstance(got, Delta)
        return chat_chunk(answer_id, model, content=got.text)

    async def closing(done: Finished) -> bytes:
        return chat_chunk(answer_id, model, reason=done.reason)

    opening = chat_chunk(answer_id, model, role=True, content="")
    return await _stream(adapter, key_name, conversation, text, opening, render, closing)


async def _responses_conversation(
    adapter: ApiAdapter, key_name: str, name: str | None, previous: str | None
) -> str:
    if name is not None:
        return conversation_name(name, "conversation")
    if previous is not None:
        found = None
        if adapter.responses is not None and len(previous) <= 64:
            found = await adapter.responses.api_response_conversation(previous, key_name=key_name)
        if found is None:
            raise ApiError(
                404,
                f"Previous response with id '{previous[:64]}' not found.",
                param="previous_response_id",
                code="previous_response_not_found",
            )
        return found
    return DEFAULT_CONVERSATION


async def responses(adapter: ApiAdapter, request: Request) -> Response:
    key_name = authenticate(adapter, request)
    asked = parse_responses(load_json(await read_body(request)))
    check_model(asked["model"])
    conversation = await _responses_conversation(
        adapter, key_name, asked["conversation"], asked["previous_response_id"]
    )
    text = new_text(asked["input"], "input")
    _check_length(adapter, text)
    response_id = f"resp_{uuid.uuid4().hex}"
    model = asked["model"]

    async def remember() -> None:
        if adapter.responses is not None:
            from gateway.platforms.http_api.adapter import PLATFORM, chat_id_of

            await adapter.responses.api_response_put(
                response_id,
                key_name=key_name,
                conversation=conversation,
                session_key=f"{PLATFORM}:{chat_id_of(key_name, conversation)}",
                at=utcnow(),
            )

    if not asked["stream"]:
        async with adapter.ask(key_name, conversation, text, stream=False) as exchange:
            done = await _final(exchange, time.monotonic() + adapter.reply_timeout, adapter.reply_timeout)
        await remember()
        return JSONResponse(response_body(response_id, model, conversation, done.text, reason=done.reason))

    sequence = iter(range(1, 1_000_000_000))
    item_id = f"msg_{response_id[5:]}"

    def render(got: Event) -> bytes:
        assert isinstance(got, Delta)
        data: dict[str, Any] = {
            "type": "response.output_text.delta",
            "item_id": item_id,
            "output_index": 0,
            "content_index": 0,
            "delta": got.text,
            "logprobs": [],
            "sequence_number": next(sequence),
        }
        return event(data, data["type"])

    async def closing(done: Finished) -> bytes:
        await remember()
        body = response_body(response_id, model, conversation, done.text, reason=done.reason)
        return event(
            {"type": "response.completed", "response": body, "sequence_number": next(sequence)},
            "response.completed",
        )

    created = {
        "type": "response.created",
        "response": response_body(response_id, model, conversation, None),
        "sequence_number": 0,
    }
    return await _stream(
        adapter, key_name, conversation, text, event(created, "response.created"), render, closing
    )
