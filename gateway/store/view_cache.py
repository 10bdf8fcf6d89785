"""The active views of the sessions this worker serves, kept in memory between turns.

Reading a session's active view from SQL costs its whole size every turn (a thousand rows,
their JSON, their token estimates); the view changes by one or two appended messages per
turn. So the store keeps each live session's view here and writes through: an append that
moved the session's ``view_version`` from exactly the cached version to the next one extends
the cached list; any other change drops it.

Correct with several workers: every transaction that changes a session's active set bumps
``sessions.view_version`` (migration 0008), and a cached view is only ever used under the
version it was read or written at. A change made elsewhere (another worker, an admin command
in another process) leaves the database one version ahead of the cache, and the next read
loads the view afresh.

Bounded: at most ``capacity`` sessions (least recently used out first), and a view unused for
``idle_seconds`` is dropped (an idle chat holds no memory).

Thread-safe: on a SQLite file a turn's claim runs whole in a worker thread (one thread hop for
the transaction), and reads and extends the cached view there.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from agent.tokens import estimate_message_tokens
from agent.types import ChatMessage

CAPACITY = 128
IDLE_SECONDS = 900.0


@dataclass(slots=True)
class _Entry:
    version: int
    messages: list[ChatMessage]
    used: float


def with_estimate(message: ChatMessage) -> ChatMessage:
    """``message`` carrying its rough token estimate (rows stored before estimates were kept have none)."""
    if message.token_estimate is not None:
        return message
    return replace(message, token_estimate=estimate_message_tokens(message))


class ActiveViews:
    """Session id -> (view version, active messages in order); see the module docstring."""

    def __init__(
        self,
        *,
        capacity: int = CAPACITY,
        idle_seconds: float = IDLE_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._capacity = capacity
        self._idle = idle_seconds
        self._clock = clock
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, session_id: str, version: int) -> list[ChatMessage] | None:
        """A copy of the cached view when it is at ``version``; None otherwise (and a stale one goes)."""
        with self._lock:
            entry = self._entries.get(session_id)
            if entry is None or entry.version != version:
                if entry is not None:
                    del self._entries[session_id]
                self.misses += 1
                return None
            self.hits += 1
            entry.used = self._clock()
            self._entries.move_to_end(session_id)
            return list(entry.messages)

    def put(self, session_id: str, version: int, messages: Sequence[ChatMessage]) -> list[ChatMessage]:
        """Keep ``messages`` as the view at ``version``; returns a copy for the caller."""
        view = [with_estimate(m) for m in messages]
        with self._lock:
            self._entries[session_id] = _Entry(version, view, self._clock())
            self._entries.move_to_end(session_id)
            self._evict()
        return list(view)

    def advance(self, session_id: str, new_version: int, appended: Sequence[ChatMessage]) -> None:
        """Write-through for appends that took the session from ``new_version - 1`` to ``new_version``.

        Only a cached view at exactly ``new_version - 1`` is extended: anything else means a
        change this cache did not see, and the view is dropped.
        """
        with self._lock:
            entry = self._entries.get(session_id)
            if entry is None:
                return
            if entry.version != new_version - 1:
                del self._entries[session_id]
                return
            entry.messages.extend(with_estimate(m) for m in appended)
            entry.version = new_version
            entry.used = self._clock()
            self._entries.move_to_end(session_id)

    def drop(self, *session_ids: str) -> None:
        with self._lock:
            for session_id in session_ids:
                self._entries.pop(session_id, None)

    def _evict(self) -> None:
        horizon = self._clock() - self._idle
        for session_id in [s for s, e in self._entries.items() if e.used < horizon]:
            del self._entries[session_id]
        while len(self._entries) > self._capacity:
            self._entries.popitem(last=False)
