"""Per-route rate windows, and how a coalesced burst reads as one prompt or message.

Coalescing itself is durable, so it happens after the inbox: each delivery is committed on its own
(the 2xx means stored), and the gateway serves a chat's webhook items a ``coalesce_seconds`` after
the first of them arrives, all together: one turn, or one plain message (``deliver_only``).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Sequence

BURST_SEPARATOR = "\n\n---\n\n"


class RateWindow:
    """At most ``per_minute`` accepted requests in any sliding 60 seconds (this process)."""

    def __init__(self, per_minute: int, clock: Callable[[], float] = time.monotonic) -> None:
        self._limit = per_minute
        self._clock = clock
        self._stamps: deque[float] = deque()

    def take(self) -> float | None:
        """Count one request and return None, or the seconds until one is allowed again."""
        now = self._clock()
        while self._stamps and now - self._stamps[0] >= 60.0:
            self._stamps.popleft()
        if len(self._stamps) >= self._limit:
            return max(0.0, 60.0 - (now - self._stamps[0]))
        self._stamps.append(now)
        return None


def joined_burst(texts: Sequence[str]) -> str:
    """The one message a burst of ``deliver_only`` texts becomes (in arrival order)."""
    if len(texts) == 1:
        return texts[0]
    return f"{len(texts)} webhook deliveries:" + BURST_SEPARATOR + BURST_SEPARATOR.join(texts)


def capped(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, saying so."""
    if len(text) <= limit:
        return text
    kept = limit
    for _ in range(2):  # the note's own length depends on the number it states
        note = f"\n[cut: the first {kept:,} of {len(text):,} characters]"
        kept = max(0, limit - len(note))
    return text[:kept] + f"\n[cut: the first {kept:,} of {len(text):,} characters]"
