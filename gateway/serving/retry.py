"""The one retry policy of serving: how long a session's work waits before it is tried again, and why.

Three things wait: a turn whose model call failed for a reason that may pass (overloaded, rate
limited, unreachable), a batch of inbox items whose serving raised, and the session worker that
comes back for either. They all read their delay here, and every wait is logged with its reason,
so "why did this turn wait 30 s?" is answered by one module and one log line. (Replies on their
way out back off on their own schedule: ``gateway.outbound.delivery``.)
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

_log = logging.getLogger(__name__)

RETRY_DELAYS = (5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0)
"""Seconds before attempt 2, 3, ...; the last one repeats."""


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Delays by attempt number; a model failure is retried once per delay, then given up on."""

    delays: tuple[float, ...] = RETRY_DELAYS

    @classmethod
    def of(cls, delays: Sequence[float]) -> RetryPolicy:
        return cls(tuple(delays) or (1.0,))

    def delay(self, attempt: int, *, why: str, key: str | None = None) -> float:
        """Seconds to wait after failed attempt ``attempt`` (1-based), logged with its reason."""
        seconds = self.delays[min(max(attempt, 1), len(self.delays)) - 1]
        _log.info(
            "waiting %.1fs before trying again (attempt %d): %s", seconds, attempt, why, extra={"key": key}
        )
        return seconds

    def retries_model(self, attempt: int) -> bool:
        """Whether a turn whose model call failed ``attempt`` times in a row is tried again."""
        return attempt <= len(self.delays)
