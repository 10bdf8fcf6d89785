"""Failed authentications per client address: the throttle of every door that takes a secret
(the admin token, the API keys).

A client address that fails :data:`MAX_FAILURES` times within :data:`FAILURE_WINDOW_SECONDS` is
answered 429 until the oldest failure ages out; memory stays bounded however many addresses try.
"""

from __future__ import annotations

import time
from collections import OrderedDict, deque
from collections.abc import Callable

MAX_FAILURES = 10
FAILURE_WINDOW_SECONDS = 60.0
MAX_TRACKED_ADDRESSES = 10_000


class FailedLogins:
    """Failed authentications per client address over a sliding window (bounded memory)."""

    def __init__(
        self,
        *,
        max_failures: int = MAX_FAILURES,
        window_seconds: float = FAILURE_WINDOW_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_failures = max_failures
        self.window = window_seconds
        self._clock = clock
        self._failures: OrderedDict[str, deque[float]] = OrderedDict()

    def _recent(self, address: str) -> deque[float]:
        times = self._failures.get(address, deque())
        horizon = self._clock() - self.window
        while times and times[0] <= horizon:
            times.popleft()
        if not times:
            self._failures.pop(address, None)
        return times

    def retry_after(self, address: str) -> float | None:
        """Seconds until ``address`` may try again; None when it is not throttled."""
        times = self._recent(address)
        if len(times) < self.max_failures:
            return None
        return max(1.0, times[-self.max_failures] + self.window - self._clock())

    def record(self, address: str) -> int:
        """Count one failure; returns how many ``address`` has in the window."""
        times = self._recent(address)
        times.append(self._clock())
        self._failures[address] = times
        self._failures.move_to_end(address)
        while len(self._failures) > MAX_TRACKED_ADDRESSES:
            self._failures.popitem(last=False)
        return len(times)
