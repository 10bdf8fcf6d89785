"""Waiting on the shared rate-limit scopes, for the Telegram and Discord limiter tests."""

from __future__ import annotations

import asyncio

from gateway.store.repository import Store


async def paused(store: Store, scope: str, seconds: float) -> None:
    """Until ``scope`` is held for at least ``seconds`` more (a pause another worker records)."""
    for _ in range(500):
        left = await store.rate_next_at(scope)
        if left is not None and left >= seconds:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"{scope} was never paused")
