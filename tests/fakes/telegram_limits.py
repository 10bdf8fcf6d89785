"""Telegram's flood limits as the fake Bot API server enforces them.

Telegram documents about 30 messages per second for a bot overall, about one per second in one
chat, and 20 per minute in a group; beyond them it answers HTTP 429
``{"ok": false, "error_code": 429, "description": "Too Many Requests: retry after N",
"parameters": {"retry_after": N}}`` and does not deliver the message. Here each limit is a sliding
window over the messages it accepted (a refused one does not count), checked widest first, and
``retry_after`` is the whole seconds until the window has room again (at least 1), as Telegram
rounds it. Sent, edited, copied and forwarded messages count; chat actions (typing) do not.
"""

from __future__ import annotations

import math
import time
from collections import Counter, defaultdict, deque
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class TelegramLimits:
    """What the fake allows: ``count`` messages per ``seconds`` in each scope."""

    per_second: int = 30
    per_chat: tuple[int, float] = (1, 1.0)
    per_group: tuple[int, float] = (20, 60.0)


class FloodLimits:
    """Sliding windows per scope; :meth:`admit` says how long to wait, or records the message."""

    def __init__(self, limits: TelegramLimits) -> None:
        self.limits = limits
        self.refused: Counter[str] = Counter()  # "global" / "chat" / "group" -> 429s answered
        self._windows: defaultdict[str, deque[float]] = defaultdict(deque)

    def admit(self, chat_id: int | str, *, group: bool) -> int | None:
        """``None`` and the message counted; or the ``retry_after`` of the 429 to answer."""
        now = time.monotonic()
        scopes = [("global", "global", self.limits.per_second, 1.0)]
        scopes.append(("chat", f"chat:{chat_id}", *self.limits.per_chat))
        if group:
            scopes.append(("group", f"group:{chat_id}", *self.limits.per_group))
        for kind, key, count, seconds in scopes:
            window = self._windows[key]
            while window and now - window[0] >= seconds:
                window.popleft()
            if len(window) >= count:
                self.refused[kind] += 1
                return max(1, math.ceil(seconds - (now - window[0])))
        for _, key, _, _ in scopes:
            self._windows[key].append(now)
        return None

    @property
    def total_refused(self) -> int:
        return sum(self.refused.values())
