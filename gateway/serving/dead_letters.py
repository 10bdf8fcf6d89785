"""Inbox dead letters: a received message that fails every time it is served must not stall its chat.

When serving a batch raises, every item still held goes back to the inbox with a retry
delay (the backoff grows with its attempts), and the session is served one item at a time
until its failures are behind it, so the message at fault is isolated and the others are
answered. An item claimed ``max_attempts`` times is marked failed with its error — a dead
letter, listed by ``hygieia sessions show`` and the admin API — and its sender is told once.
An item whose claims ran out without a recorded failure (it took its worker down) is set
aside when claimed again. Transient model errors never get here: the gateway retries those
turns itself, without counting attempts.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

from agent.clock import Clock
from gateway.outbound.failures import SET_ASIDE
from gateway.outbound.replies import Replies
from gateway.platforms.base import OutboundTarget
from gateway.serving.inbound import InboxItem, parse_item
from gateway.serving.retry import RetryPolicy
from gateway.store.records import InboxRecord
from gateway.store.repository import Store

_log = logging.getLogger(__name__)

MAX_ERROR_CHARS = 1000


def describe(exc: BaseException) -> str:
    """The error as stored with a dead letter: its type and message, bounded."""
    return f"{type(exc).__name__}: {exc}"[:MAX_ERROR_CHARS]


class InboxFailures:
    """Retry, isolate and set aside failing inbox items (see the module docstring)."""

    def __init__(
        self,
        store: Store,
        replies: Replies,
        *,
        worker_id: str,
        max_attempts: int,
        retry: RetryPolicy,
        clock: Clock,
    ) -> None:
        self._store = store
        self._replies = replies
        self._worker = worker_id
        self._max = max_attempts
        self._retry = retry
        self._clock = clock
        self._isolated: set[str] = set()

    def batch_size(self, key: str, default: int) -> int:
        """One item at a time while the session has failures to get past."""
        return 1 if key in self._isolated else default

    async def weed(self, items: list[InboxItem]) -> list[InboxItem]:
        """Set aside the items claimed more often than allowed; returns the others."""
        spent = [i for i in items if i.attempts > self._max]
        if spent:
            error = f"gave up after {self._max} attempts: serving it stopped its worker every time"
            await self._give_up(spent, error)
        return [i for i in items if i.attempts <= self._max]

    async def failed(self, key: str, items: Sequence[InboxItem | InboxRecord], exc: Exception) -> None:
        """Serving ``items`` raised ``exc``: retry them later, or give up on those out of attempts."""
        attempt = max(i.attempts for i in items)
        delay = self._retry.delay(attempt, why=f"serving raised {type(exc).__name__}", key=key)
        _log.error(
            "serving %d message(s) failed (attempt %d of %d); retrying in %.1fs",
            len(items),
            attempt,
            self._max,
            delay,
            exc_info=exc,
            extra={"key": key},
        )
        self._isolated.add(key)
        dead = await self._store.inbox_fail(
            [i.id for i in items],
            worker=self._worker,
            error=describe(exc),
            max_attempts=self._max,
            retry_at=self._clock() + timedelta(seconds=delay),
        )
        for record in dead:
            await self._tell(record)

    async def retry_in(self, key: str) -> float | None:
        """Seconds until the session's next delayed item is due; None when it has none."""
        if key not in self._isolated:
            return None
        due = await self._store.inbox_next_retry(key)
        if due is None:
            self._isolated.discard(key)
            return None
        return max(0.05, (due - self._clock()).total_seconds())

    async def _give_up(self, items: Sequence[InboxItem], error: str) -> None:
        dead = await self._store.inbox_fail(
            [i.id for i in items], worker=self._worker, error=error, max_attempts=0, retry_at=self._clock()
        )
        for record in dead:
            await self._tell(record)

    async def _tell(self, record: InboxRecord) -> None:
        _log.error(
            "set a message aside after %d attempts: %s",
            record.attempts,
            record.error,
            extra={"key": record.session_key, "inbox_id": record.id},
        )
        if record.addressed:
            await self._replies.set_aside(_answerable(record), SET_ASIDE)


@dataclass(frozen=True, slots=True)
class _SetAside:
    """What the set-aside notice needs of an item whose JSON may not even parse."""

    id: int
    session_key: str
    reply_target: OutboundTarget


def _answerable(record: InboxRecord) -> InboxItem | _SetAside:
    try:
        return parse_item(record)
    except ValueError:
        # Unreadable JSON: answer in the chat, quoting the message, outside any thread.
        target = OutboundTarget(record.platform, record.chat_id, None, record.platform_message_id)
        return _SetAside(record.id, record.session_key, target)
