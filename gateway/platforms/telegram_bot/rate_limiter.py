"""Telegram's flood limits paced across the cluster: python-telegram-bot's rate-limiter seam over a
:class:`gateway.platforms.pacing.RatePacer`.

Telegram allows a bot about 30 messages per second overall, about one per second in one chat and
20 per minute in a group, and answers 429 with ``retry_after`` beyond them. PTB's own
``AIORateLimiter`` counts one process's sends, so N workers send up to N times the limit. Here
every send that counts (``send*`` but typing, ``edit*``, copies and forwards) first reserves a
slot in its scopes, shared by every worker on the database: ``telegram:global``,
``telegram:chat:<id>``, and for a group or channel also ``telegram:group:<id>``.

A 429 pauses the scopes it most likely came from, for every worker: Telegram does not say which
limit was hit. A private chat's 429 pauses the chat and the whole bot (PTB halts all requests too;
the wait is short); a group's pauses the group only (its minute limit can ask for tens of
seconds, and halting every other chat for one busy group would be wrong).

Consecutive sends to one chat are also spaced from the *end* of the previous one in this process:
the shared slot is taken before sending, and a send that reached Telegram late (a slow network, a
stalled loop) followed by one on time would land closer together than the slot says.
"""

from __future__ import annotations

import asyncio
import logging
import time
import warnings
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from telegram.error import NetworkError, RetryAfter
from telegram.ext import AIORateLimiter, BaseRateLimiter
from telegram.warnings import PTBDeprecationWarning

from agent.errors import StoreError
from gateway.config import TelegramSettings
from gateway.platforms.pacing import RatePacer, ScopeSpec

_log = logging.getLogger(__name__)

PLATFORM = "telegram"
PAUSE_MARGIN = 0.1
"""Seconds added to a ``retry_after``, as PTB does."""
_RECENT_CHATS = 4096
_Callback = Callable[..., Coroutine[Any, Any, Any]]


@dataclass(frozen=True, slots=True)
class TelegramRates:
    """How fast sends may go (defaults below Telegram's published limits, for clock and network jitter)."""

    per_second: float = 20.0
    chat_interval_seconds: float = 1.1
    group_per_minute: float = 19.0


def counted(endpoint: str) -> bool:
    """The methods Telegram's flood limits count: messages sent, edited, copied or forwarded."""
    if endpoint == "sendChatAction":
        return False
    return endpoint.startswith(("send", "edit")) or endpoint in (
        "copyMessage",
        "copyMessages",
        "forwardMessage",
        "forwardMessages",
    )


def is_group(chat_id: object) -> bool:
    """Groups, supergroups and channels have negative ids (or an ``@name``); private chats positive."""
    if isinstance(chat_id, int):
        return chat_id < 0
    text = str(chat_id)
    return not text.isdigit()


def retry_seconds(exc: RetryAfter) -> float:
    with warnings.catch_warnings():  # PTB warns about the int form of retry_after
        warnings.simplefilter("ignore", PTBDeprecationWarning)
        value = exc.retry_after
    return value.total_seconds() if isinstance(value, timedelta) else float(value)


def rate_limiter_for(
    pacer: RatePacer | None, settings: TelegramSettings, *, max_retries: int
) -> BaseRateLimiter[int]:
    """PTB's own limiter in one process (overall and per group); the shared one over ``pacer``."""
    retries = max(0, max_retries)
    if pacer is None:
        return AIORateLimiter(max_retries=retries)
    rates = TelegramRates(
        per_second=settings.rate_per_second,
        chat_interval_seconds=settings.rate_chat_interval_seconds,
        group_per_minute=settings.rate_group_per_minute,
    )
    return SharedRateLimiter(pacer, rates, max_retries=retries)


# A send this much later than its reserved slot takes a new one (at most this many times).
LATE_SECONDS = 0.25
LATE_RESERVATIONS = 3


class SharedRateLimiter(BaseRateLimiter[int]):
    """Paces counted requests through ``pacer``; a 429 is recorded for every worker and retried
    (up to ``max_retries`` times, or the per-call ``rate_limit_args``)."""

    def __init__(self, pacer: RatePacer, rates: TelegramRates, *, max_retries: int = 0) -> None:
        self._pacer = pacer
        self._rates = rates
        self._max_retries = max_retries
        self._finished: dict[str, float] = {}  # chat -> when its last send here ended (monotonic)

    async def initialize(self) -> None:
        """Nothing to set up: the scopes live in the database."""

    async def shutdown(self) -> None:
        """Nothing to release."""

    def scopes(self, chat_id: object) -> list[ScopeSpec]:
        chat = str(chat_id)
        found = [
            (f"{PLATFORM}:global", 1.0 / self._rates.per_second),
            (f"{PLATFORM}:chat:{chat}", self._rates.chat_interval_seconds),
        ]
        if is_group(chat_id):
            found.append((f"{PLATFORM}:group:{chat}", 60.0 / self._rates.group_per_minute))
        return found

    def pause_scopes(self, chat_id: object) -> list[str]:
        chat = str(chat_id)
        if is_group(chat_id):
            return [f"{PLATFORM}:chat:{chat}", f"{PLATFORM}:group:{chat}"]
        return [f"{PLATFORM}:global", f"{PLATFORM}:chat:{chat}"]

    async def process_request(
        self,
        callback: _Callback,
        args: Any,
        kwargs: dict[str, Any],
        endpoint: str,
        data: dict[str, Any],
        rate_limit_args: int | None,
    ) -> Any:
        chat_id = data.get("chat_id")
        if chat_id is None or not counted(endpoint):
            return await callback(*args, **kwargs)
        retries = rate_limit_args if rate_limit_args is not None else self._max_retries
        for attempt in range(retries + 1):
            await self._after_previous(str(chat_id))
            await self._wait_for_slot(chat_id)
            try:
                return await callback(*args, **kwargs)
            except RetryAfter as exc:
                seconds = retry_seconds(exc) + PAUSE_MARGIN
                _log.info("telegram: 429 in chat %s, pausing its scopes for %.1fs", chat_id, seconds)
                await self._pause(chat_id, seconds)
                if attempt == retries:
                    raise
            finally:
                self._finished_now(str(chat_id))
        raise AssertionError("unreachable: the last attempt returns or raises")

    async def _after_previous(self, chat: str) -> None:
        ended = self._finished.get(chat)
        if ended is not None:
            wait = ended + self._rates.chat_interval_seconds - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)

    def _finished_now(self, chat: str) -> None:
        self._finished[chat] = time.monotonic()
        if len(self._finished) > _RECENT_CHATS:
            horizon = time.monotonic() - self._rates.chat_interval_seconds
            self._finished = {c: t for c, t in self._finished.items() if t > horizon}

    async def _wait_for_slot(self, chat_id: object) -> None:
        for _ in range(LATE_RESERVATIONS):
            try:
                wait = await self._pacer.rate_reserve(PLATFORM, self.scopes(chat_id))
            except StoreError as exc:  # mapped by the adapter like any transport failure: retried later
                raise NetworkError(f"shared rate limits unavailable: {exc}") from exc
            due = time.monotonic() + max(wait, 0.0)
            if wait > 0:
                await asyncio.sleep(wait)
            late = time.monotonic() - due
            if late <= LATE_SECONDS:
                return
            # The process stalled past its slot (a busy machine): sent now, this send would land
            # together with the slots after it. It takes a new one instead.
            _log.info("telegram: %.2fs late for a send slot in chat %s, taking another", late, chat_id)

    async def _pause(self, chat_id: object, seconds: float) -> None:
        try:
            await self._pacer.rate_pause(PLATFORM, self.pause_scopes(chat_id), seconds)
        except StoreError as exc:  # this process still waits before its retry
            _log.warning("telegram: could not share a 429 pause: %s", exc)
            await asyncio.sleep(seconds)
