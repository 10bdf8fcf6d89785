"""Rate limits shared by a cluster: the seam an adapter paces its sends through.

A platform's limits are scopes (``telegram:global``, ``telegram:chat:42``), each with the interval
its sends keep. The adapter asks the pacer for the next slot in all of a send's scopes and waits
that long; a platform's "too many requests, retry after N" pauses the scopes it names. The store
implements it (:class:`gateway.store.rate_ops.RateOps`) so that every worker on one database
shares the slots; the adapters never import the store.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

ScopeSpec = tuple[str, float]
"""``(scope name, seconds between two sends in it)``."""


class RatePacer(Protocol):
    async def rate_reserve(self, platform: str, scopes: Sequence[ScopeSpec]) -> float:
        """Take the next slot in every scope; seconds to wait before sending."""
        ...

    async def rate_pause(self, platform: str, names: Sequence[str], seconds: float) -> None:
        """No send in these scopes, by any worker, for ``seconds``."""
        ...
