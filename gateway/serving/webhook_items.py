"""Webhook deliveries in the inbox: the coalescing window a new one joins.

Coalescing is durable: a delivery is stored at once, with a time before which it is not claimed
(the inbox's ``lease_until`` of a pending item). The first delivery to a chat opens the window
(now + ``coalesce_seconds``); later ones within it take the same time, so one claim takes them all
and they are served as one turn or one message, on whichever worker, after any restart.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from gateway.platforms.base import WebhookOrigin
from gateway.store.repository import Store

WINDOW_SLACK = 0.05
"""Seconds the kick waits past the window's end, so that the claim finds every item of it due."""


async def coalescing_until(
    store: Store, key: str, origin: WebhookOrigin | None, now: datetime
) -> datetime | None:
    """When a webhook delivery to ``key`` becomes claimable; None: at once (no window)."""
    if origin is None or not origin.coalesce_seconds:
        return None
    opened = await store.inbox_next_retry(key)
    if opened is not None and now < opened <= now + timedelta(seconds=origin.coalesce_seconds):
        return opened
    return now + timedelta(seconds=origin.coalesce_seconds)
