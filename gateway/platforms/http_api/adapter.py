"""The ``api`` platform: requests to the OpenAI-compatible API go through the gateway like any chat.

A request becomes an :class:`InboundMessage` of the chat ``<key name>:<conversation>`` (session key
``api:<key name>:<conversation>``), committed to the inbox by the gateway's intake before anything
else happens; the request then waits for the gateway to answer that message. The answer comes
back through this adapter's :meth:`send` (a whole reply) or :meth:`stream_send` / :meth:`edit` /
:meth:`stream_end` (a reply shown while written, for ``stream: true``), matched to the waiting
request by the message id the gateway quotes. Failure replies (``gateway.outbound.failures``)
become OpenAI-shaped errors. Requests to one conversation are served one after the other, so each
gets its own answer. Notices (hygiene, summarizing) are not answers and are not shown.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import uuid
from collections.abc import AsyncIterator
from datetime import datetime
from typing import Protocol

from starlette.types import ASGIApp

from gateway.errors import AdapterError
from gateway.outbound.failures import BROKEN, GAVE_UP, NO_ACCESS, OVERLOADED, SET_ASIDE, TOO_LONG
from gateway.outbound.replies import REFUSAL_LINE
from gateway.outbound.streaming import INTERRUPTED_NOTE
from gateway.platforms.base import InboundHandler, InboundMessage, OutboundTarget, PlatformAdapter
from gateway.platforms.http_api.errors import (
    ApiError,
    context_length_exceeded,
    overloaded,
    unavailable,
)
from gateway.platforms.http_api.exchange import Exchange
from gateway.platforms.http_api.keys import ApiKeys
from gateway.throttle import FailedLogins

_log = logging.getLogger(__name__)

PLATFORM = "api"
PREFIX = "/v1"
MODEL_NAME = "hygieia"
REPLY_TIMEOUT_SECONDS = 600.0


class Door(Protocol):
    """The shared HTTP listener (``gateway.runner.listener.DoorListener``)."""

    def mount(self, prefix: str, app: ASGIApp) -> None: ...

    async def open(self) -> None: ...

    async def close(self) -> None: ...

    @property
    def port(self) -> int: ...


class ResponseBook(Protocol):
    """Where ``/v1/responses`` ids are kept (the store's ``ApiResponseOps``)."""

    async def api_response_put(
        self, response_id: str, *, key_name: str, conversation: str, session_key: str, at: datetime
    ) -> None: ...

    async def api_response_conversation(self, response_id: str, *, key_name: str) -> str | None: ...


FAILURES: dict[str, ApiError] = {
    TOO_LONG: context_length_exceeded(
        "This conversation is too long for the model, even after summarizing: "
        "send the message in smaller parts."
    ),
    GAVE_UP: overloaded(),
    NO_ACCESS: unavailable("The service cannot reach the model right now; an admin has to fix its access."),
    BROKEN: unavailable("Something went wrong while answering; please try again.", "answer_failed"),
    SET_ASIDE: unavailable("This message could not be answered after several tries.", "answer_failed"),
}
"""The gateway's failure replies, as an OpenAI client expects them."""


def chat_id_of(key_name: str, conversation: str) -> str:
    return f"{key_name}:{conversation}"


class ApiAdapter(PlatformAdapter):
    """See the module docstring. Mounts its app on ``door`` when built; ``start`` opens the door."""

    name = PLATFORM
    text_limit = 1_000_000  # an HTTP answer has no message limit: one reply, one part
    streams = True
    edit_interval_seconds = (
        0.05  # server-sent events have no rate limit: deltas as they come, batched a little
    )

    def __init__(
        self,
        keys: ApiKeys,
        door: Door,
        *,
        max_chars: int,
        reply_timeout: float = REPLY_TIMEOUT_SECONDS,
        throttle: FailedLogins | None = None,
    ) -> None:
        from gateway.platforms.http_api.app import build_app  # the app reads this module's names

        self.keys = keys
        self.door = door
        self.max_chars = max_chars
        self.reply_timeout = reply_timeout
        self.throttle = throttle if throttle is not None else FailedLogins()
        self.responses: ResponseBook | None = None
        self._handler: InboundHandler | None = None
        self._exchanges: dict[str, Exchange] = {}
        self._turns: dict[str, asyncio.Lock] = {}
        self._counter = itertools.count(1)
        self._started = False
        door.mount(PREFIX, build_app(self))

    def keep_responses(self, book: ResponseBook) -> None:
        """Before :meth:`start`: where response ids are kept (the builder hands the store)."""
        self.responses = book

    # lifecycle ---------------------------------------------------------------------------
    async def start(self, handler: InboundHandler) -> None:
        if self._started:
            return
        self._handler = handler
        await self.door.open()
        self._started = True
        _log.info("OpenAI-compatible API listening", extra={"port": self.door.port, "keys": self.keys.names})

    async def stop(self) -> None:
        if not self._started:
            return
        self._started = False
        for exchange in list(self._exchanges.values()):
            exchange.fail(unavailable("The service is stopping; your message is kept.", "shutting_down"))
        await self.door.close()

    # the HTTP side -----------------------------------------------------------------------
    @contextlib.asynccontextmanager
    async def ask(
        self, key_name: str, conversation: str, text: str, *, stream: bool
    ) -> AsyncIterator[Exchange]:
        """Commit ``text`` to the conversation and yield the exchange its answer arrives on; one
        request per conversation at a time."""
        handler = self._handler
        if handler is None:
            raise unavailable("The API is not started.", "not_started")
        chat_id = chat_id_of(key_name, conversation)
        lock = self._turns.setdefault(chat_id, asyncio.Lock())
        async with lock:
            exchange = Exchange(f"{uuid.uuid4().hex}", chat_id, stream=stream)
            self._exchanges[exchange.message_id] = exchange
            try:
                try:
                    await handler(
                        InboundMessage(
                            platform=PLATFORM,
                            chat_id=chat_id,
                            user_id=key_name,
                            user_name=key_name,
                            text=text,
                            platform_message_id=exchange.message_id,
                            chat_type="dm",
                            addressed=True,
                        )
                    )
                except Exception as exc:  # the inbox could not take it: nothing is stored, say so
                    _log.warning("api: the message could not be stored: %s", exc, extra={"chat": chat_id})
                    raise unavailable(
                        "Your message could not be stored right now; nothing was kept. Try again.",
                        "store_unavailable",
                    ) from None
                yield exchange
            finally:
                exchange.closed = True
                del self._exchanges[exchange.message_id]
        if not lock.locked() and self._turns.get(chat_id) is lock:
            del self._turns[chat_id]

    # the gateway's side ------------------------------------------------------------------
    def _exchange(self, target: OutboundTarget) -> Exchange | None:
        return self._exchanges.get(target.reply_to_message_id or "")

    def _next_id(self) -> str:
        return f"api-out-{next(self._counter)}"

    def streams_to(self, target: OutboundTarget) -> bool:
        exchange = self._exchange(target)
        return exchange is not None and exchange.stream

    async def send(self, target: OutboundTarget, text: str) -> list[str]:
        if not self._started:
            raise AdapterError("the API adapter is not started")
        exchange = self._exchange(target)
        if exchange is None:
            if target.reply_to_message_id is None and text == OVERLOADED:
                # The turn is retried later in the background: the waiting request hears it now.
                for waiting in self._exchanges.values():
                    if waiting.chat_id == target.chat_id:
                        waiting.fail(overloaded())
            else:
                # A notice, or the answer to a request that is gone (timed out, disconnected): it
                # is in the conversation all the same.
                _log.debug("api: nobody is waiting for this message", extra={"chat": target.chat_id})
            return [self._next_id()]
        failure = FAILURES.get(text)
        if failure is not None:
            exchange.fail(failure)
        else:
            exchange.finish(text, "content_filter" if text == REFUSAL_LINE else "stop")
        return [self._next_id()]

    async def stream_send(self, target: OutboundTarget, text: str) -> str:
        exchange = self._exchange(target)
        if exchange is not None:
            exchange.show(text)
        return self._next_id()

    async def edit(self, target: OutboundTarget, message_id: str, text: str) -> None:
        exchange = self._exchange(target)
        if exchange is not None:
            exchange.show(text)

    async def stream_end(self, target: OutboundTarget) -> None:
        exchange = self._exchange(target)
        if exchange is None:
            return
        text = exchange.streamed
        # A reply cut short (a failed or retried turn) ends with the gateway's note, or showed nothing
        # yet; its answer, or its failure, follows as a send.
        if not text.strip() or text.rstrip().endswith(INTERRUPTED_NOTE):
            return
        exchange.finish(text, "content_filter" if text.endswith(REFUSAL_LINE) else "stop")
